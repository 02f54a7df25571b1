"""The sweep: slow housekeeping that keeps the system converged.

- rebuilds every endpoint's edge config in Redis from Postgres (heals a Redis restart or a lost write);
- prepares the next days' event partitions and drops those past retention;
- builds the ``q`` search index of each day's partition once the day is over.
"""

from __future__ import annotations

import logging

from control.db import partitions
from control.service import Context
from control.service.edge_config import resync_all

__all__ = ("Sweep",)

log = logging.getLogger("hookyard.worker.sweep")


class Sweep:
    name = "sweep"

    def __init__(self, ctx: Context, *, interval_s: float = 30.0) -> None:
        self.ctx = ctx
        self.idle_s = interval_s

    async def step(self) -> int:
        written, removed = await resync_all(self.ctx)
        async with self.ctx.pool.acquire() as conn:
            created = await partitions.ensure_ahead(conn)
            dropped = await partitions.drop_expired(conn, retention_days=self.ctx.settings.retention_days)
            indexed = await partitions.index_finished_days(conn)
        log.debug(
            "sweep: %d edge configs written, %d removed; partitions +%d -%d; search index built on %s",
            *(written, removed, created, dropped, indexed or "none"),
        )
        return 0  # housekeeping is never "more work waiting": wait a full interval
