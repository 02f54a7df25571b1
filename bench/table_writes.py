"""What a delivered event writes in Postgres: row versions of the delivery tables over a bench run, per event.

Issue 48 asks for fewer whole statements and row versions per delivered event, and ADR 0064's claim-at-flush
attempt showed why they must be counted, not inferred: it was built, measured as no gain, and only then was it
clear that nobody had counted how many tasks took the new path. ``bench pipeline`` therefore prints, beside
its CPU figures, each delivery table's inserts, updates (and of those the HOT ones, which write no index
entry) and deletes per delivered event, from ``pg_stat_user_tables`` (the embedded server ships no
``pg_stat_statements``).

The counters are read before the load starts and again once the service has stopped: a backend reports its
counts when a transaction ends at most once a second and otherwise when it goes idle or exits, so only after
every one of the service's backends ended are the counts complete.
"""

from __future__ import annotations

from collections.abc import Mapping

from control.db import connect

__all__ = ("TABLES", "Counts", "per_event", "snapshot")

TABLES = {"delivery_tasks": "tasks", "deliveries": "records", "events": "events"}
"""The tables counted, with the short name their figures carry (``tasks_upd``, ``records_ins``, ...)."""

_COLUMNS = {"ins": "n_tup_ins", "upd": "n_tup_upd", "hot": "n_tup_hot_upd", "del": "n_tup_del"}

Counts = dict[str, int]
"""``{short name}_{ins|upd|hot|del}`` → rows so far."""


async def snapshot(database_url: str) -> Counts:
    """The counters of the tables in ``TABLES`` so far (a day partition of ``events`` counts as ``events``)."""
    conn = await connect(database_url)
    try:
        rows = await conn.fetch(
            f"""SELECT CASE WHEN relname ~ '^events_[0-9]{{8}}$' THEN 'events' ELSE relname END AS name,
                       {", ".join(f"sum({c})::bigint AS {k}" for k, c in _COLUMNS.items())}
                  FROM pg_stat_user_tables
                 WHERE relname = ANY($1::text[]) OR relname ~ '^events_[0-9]{{8}}$'
                 GROUP BY 1""",
            list(TABLES),
        )
    finally:
        await conn.close()
    return {f"{TABLES[r['name']]}_{k}": int(r[k]) for r in rows if r["name"] in TABLES for k in _COLUMNS}


def per_event(before: Mapping[str, int], after: Mapping[str, int], delivered: int) -> dict[str, float]:
    """Each counter's growth from ``before`` to ``after`` per delivered event, two decimals; counters that did not
    move are left out (a run that deleted nothing prints no ``_del``)."""
    moved = {k: after[k] - before.get(k, 0) for k in after}
    return {k: round(v / max(delivered, 1), 2) for k, v in sorted(moved.items()) if v}
