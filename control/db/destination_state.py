"""A destination's state: ``enabled``, or ``disabled`` (by a 410 answer, or through the API) with its tasks held.

Disabling marks the destination and holds its pending tasks (status ``held``: out of the due index, no
attempt counted, nothing for the circuit) in one transaction, and tells the deliver workers (NOTIFY
``disabled:<id>``) to hand back what they claimed ahead of it. A task that becomes pending later (an attempt
that was in flight, a task routed meanwhile, a retry by hand) is held by the claim itself
(``control.db.tasks``: its gate reads ``disabled``). Enabling releases every held task as it was (due when it
was due, FIFO lines in their order, attempts as they were), closes the circuit and ends a pause: the
destination starts afresh.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.db.connection import Connection
from control.db.tasks import NOTIFY_CHANNEL

__all__ = ("disable", "enable", "held_count")


async def disable(conn: Connection, destinations: Sequence[tuple[str, str, str]]) -> list[str]:
    """Disables ``(destination_id, reason, by)`` (``by``: ``gone`` or ``api``) and holds their pending tasks;
    the ids that were enabled until now (one disabled already keeps its first reason and time). Run it in the
    caller's transaction; the notification goes out at its commit."""
    if not destinations:
        return []
    rows = sorted(destinations)
    changed = await conn.fetch(
        """UPDATE destinations d
              SET state = 'disabled', disabled_reason = u.reason, disabled_at = now(), disabled_by = u.by
             FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, reason, by)
            WHERE d.id = u.id AND d.state = 'enabled'
        RETURNING d.id""",
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
    )
    ids = [r["id"] for r in changed]
    if ids:
        await conn.execute(
            """UPDATE delivery_tasks SET status = 'held', updated_at = now()
                WHERE destination_id = ANY($1::text[]) AND status = 'pending'""",
            ids,
        )
        for destination_id in ids:
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, f"disabled:{destination_id}")
    return ids


async def enable(conn: Connection, destination_id: str) -> int | None:
    """Enables the destination and releases its held tasks (how many: 0 when it was enabled already); None
    when it is gone. Run it in the caller's transaction; the deliver workers are woken at its commit."""
    state = await conn.fetchval("SELECT state FROM destinations WHERE id = $1 FOR NO KEY UPDATE", destination_id)
    if state is None:
        return None
    if state == "enabled":
        return 0
    await conn.execute(
        """UPDATE destinations
              SET state = 'enabled', disabled_reason = NULL, disabled_at = NULL, disabled_by = NULL,
                  circuit = 'closed', consecutive_failures = 0, circuit_opened_at = NULL, paused_until = NULL
            WHERE id = $1""",
        destination_id,
    )
    released = await conn.execute(
        """UPDATE delivery_tasks SET status = 'pending', updated_at = now()
            WHERE destination_id = $1 AND status = 'held'""",
        destination_id,
    )
    await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, f"enabled:{destination_id}")
    return int(released.rsplit(" ", 1)[-1])


async def held_count(conn: Connection, destination_id: str) -> int:
    found: int = await conn.fetchval(
        "SELECT count(*) FROM delivery_tasks WHERE destination_id = $1 AND status = 'held'", destination_id
    )
    return found
