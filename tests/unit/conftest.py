"""Unit tests: pure functions of ``shared`` and ``control`` (signatures, attribution, conditions, ids, settings,
samples, the compiled ``shared._native``). No Postgres, no Redis, no processes: this room runs in seconds."""
