"""Body retention: an endpoint's ``body_retention_days`` removes bodies before the instance drops events.

The sweep calls :func:`expire_bodies` once a round. For each endpoint whose bodies expire before its events
do, it expires batches (``control.db.retention.expire_batch``: one short transaction each) from the
endpoint's watermark up to the cutoff, within a time budget per round, so a first round on a large
database (a retention just lowered, or set on a busy endpoint) spreads over rounds instead of holding the
sweep's other duties; the watermark makes the next round start where this one stopped.

An event whose flush was delayed past the watermark (received before it, stored after it moved) keeps
its body until the instance's retention: the cutoff is at least a day old, so that needs a flush a day late.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from control.db import retention as db_retention
from control.db.context import Context

__all__ = ("BATCH", "Expired", "expire_bodies")

BATCH = 1000
"""Events per batch (and transaction): measured on the bench database, see docs/reference/retention.md."""


class Expired(NamedTuple):
    events: int
    deliveries: int
    finished: bool
    """False when the budget ran out with events still due (the next round goes on)."""


async def expire_bodies(ctx: Context, *, batch: int = BATCH, budget_s: float = 10.0) -> Expired:
    deadline = time.monotonic() + budget_s
    events = deliveries = 0
    async with ctx.pool.acquire() as conn:
        due = await db_retention.due_endpoints(conn, retention_days=ctx.settings.retention_days)
    for endpoint in due:
        since = endpoint["watermark"]
        while True:
            if time.monotonic() >= deadline:
                return Expired(events, deliveries, finished=False)
            async with ctx.pool.acquire() as conn:
                done = await db_retention.expire_batch(
                    conn, endpoint["id"], since=since, cutoff=endpoint["cutoff"], limit=batch
                )
            events += done.events
            deliveries += done.deliveries
            if done.events < batch:
                break
            since = done.last
    return Expired(events, deliveries, finished=True)
