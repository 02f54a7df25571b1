"""The delivery backlog per destination: how many deliveries are due and not yet sent, and how long the
oldest of them has waited past its due time (``control.support.backlog_metrics`` reads it on a timer).

Index-backed and bounded: unordered tasks are read from ``delivery_tasks_due`` (``next_attempt_at`` of
pending unordered tasks), oldest due first, FIFO tasks from ``delivery_tasks_fifo`` (pending ordered tasks by
destination); each part reads at most ``limit`` rows, so a backlog of millions costs a bounded scan whose
counts then say "at least" (the oldest, what an alert looks at, are always among those read).
"""

from __future__ import annotations

from control.db.connection import Connection

__all__ = ("due_by_destination",)

_DUE = """
SELECT destination_id, count(*)::bigint AS due,
       greatest(extract(epoch FROM now() - min(next_attempt_at)), 0)::float8 AS oldest_s
  FROM (
        (SELECT destination_id, next_attempt_at FROM delivery_tasks
          WHERE status = 'pending' AND order_key IS NULL AND next_attempt_at <= now()
          ORDER BY next_attempt_at LIMIT $1)
        UNION ALL
        (SELECT destination_id, next_attempt_at FROM delivery_tasks
          WHERE status = 'pending' AND order_key IS NOT NULL AND next_attempt_at <= now()
          LIMIT $1)
       ) due
 GROUP BY destination_id
 ORDER BY oldest_s DESC
 LIMIT $2
"""


async def due_by_destination(conn: Connection, *, limit: int, destinations: int) -> list[tuple[str, int, float]]:
    """(destination id, deliveries due, seconds the oldest has waited past its due time), most overdue first,
    for at most ``destinations`` destinations; reads at most ``limit`` due tasks of each kind."""
    rows = await conn.fetch(_DUE, limit, destinations)
    return [(r["destination_id"], r["due"], r["oldest_s"]) for r in rows]
