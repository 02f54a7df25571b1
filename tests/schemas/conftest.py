"""Schemas (``control.schemas``): learning in the real flush, the version rule, the typed fast path, the /v1
schema routes, and the generated code checked by the real tools (``tests/node``). Their helpers (an endpoint,
its records, the flush and learn that drain them): ``tests/schemas/support.py``."""
