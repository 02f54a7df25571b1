"""The sweep: slow housekeeping that keeps the system converged.

- rebuilds every endpoint's edge config in Redis from Postgres (heals a lost write), at start and every
  ``interval_s``; and at once when Redis lost its data: a marker key (``Keys.config_marker``), complete only
  once a rebuild wrote every config, is read every ``check_every_s``, so after a Redis restart without
  persistence endpoints answer again within about a second; until then the edges answer a token they do
  not find 503 (retry), never 404;
- prepares the next days' event partitions and drops those past retention;
- builds the ``q`` search index of each day's partition once the day is over, and of today's up to its
  last whole hour (``control.db.partitions``);
- removes expired temporary endpoints and the anonymous accounts they leave empty
  (``control.workers.sweep.expired_endpoints``), every round;
- removes the stats counters older than the stats window (``retention.prune_stats``), every round;
- removes the bodies and headers of events past their endpoint's ``body_retention_days``
  (``control.workers.sweep.retention``), in short batches within a time budget per round;
- removes the delivery records and finished delivery tasks past the instance's retention, as their events
  go (``control.workers.sweep.retention``), in short batches within a time budget per round;
- removes the dead letters past their endpoint's body retention, and the alerts resolved longer ago than
  the instance's retention (``control.workers.sweep.retention``), every round;
- removes the deduplication keys whose window is over (``control.db.dedup.prune``), every round.
"""

from __future__ import annotations

import logging
import time

from control.db import dedup, partitions
from control.db.context import Context
from control.support.edge_config import configs_complete, rebuild_all, resync_all
from control.workers.sweep.expired_endpoints import expire_temporary
from control.workers.sweep.retention import (
    expire_bodies,
    expire_records,
    prune_alerts,
    prune_dead_letters,
    prune_stats,
)

__all__ = ("Sweep",)

log = logging.getLogger("hookyard.worker.sweep")


class Sweep:
    name = "sweep"

    def __init__(self, ctx: Context, *, interval_s: float = 30.0, check_every_s: float = 1.0) -> None:
        self.ctx = ctx
        self.interval_s = interval_s
        self.idle_s = check_every_s
        self._next_round = 0.0  # monotonic time of the next full round; the first step runs one
        self._rebuild = False  # Redis lost its data and the edge configs are not rebuilt yet

    async def step(self) -> int:
        due = time.monotonic() >= self._next_round
        if not await configs_complete(self.ctx):
            if not due and not self._rebuild:
                log.warning("sweep: Redis lost the edge configs (restarted without its data?); rebuilding them")
            self._rebuild = True
        if self._rebuild or due:
            # A rebuild that fails leaves the flag (and the round) pending, so the next step tries again. A
            # round over complete configs only heals lost writes: the marker stays complete, so the edges
            # keep answering an unknown token 404 meanwhile.
            if self._rebuild:
                written, removed = await rebuild_all(self.ctx)
            else:
                written, removed = await resync_all(self.ctx)
            self._rebuild = False
            log.debug("sweep: %d edge configs written, %d tombstoned", written, removed)
        if due:
            async with self.ctx.pool.acquire() as conn:
                created = await partitions.ensure_ahead(conn)
                dropped = await partitions.drop_expired(conn, retention_days=self.ctx.settings.retention_days)
                indexed = await partitions.index_finished_days(conn)
                prefix = await partitions.index_today(conn)
            log.debug(
                "sweep: partitions +%d -%d; search index built on %s; today's prefix %s",
                created,
                dropped,
                indexed or "none",
                prefix or "unchanged",
            )
            expired = await expire_temporary(self.ctx)
            if expired.endpoints or expired.accounts:
                log.info(
                    "sweep: %d expired temporary endpoint(s) and %d empty anonymous account(s) removed",
                    expired.endpoints,
                    expired.accounts,
                )
            pruned = await prune_stats(self.ctx)
            log.debug("sweep: %d stats counter rows past the window removed", pruned)
            bodies = await expire_bodies(self.ctx)
            if bodies.events:
                log.info(
                    "sweep: bodies of %d event(s) and %d delivery record(s) past body retention removed%s",
                    bodies.events,
                    bodies.deliveries,
                    "" if bodies.finished else " (more next round)",
                )
            gone = await expire_records(self.ctx)
            if gone.records or gone.tasks:
                log.info(
                    "sweep: %d delivery record(s) and %d finished task(s) past retention removed%s",
                    gone.records,
                    gone.tasks,
                    "" if gone.finished else " (more next round)",
                )
            letters, alerts = await prune_dead_letters(self.ctx), await prune_alerts(self.ctx)
            if letters or alerts:
                log.info("sweep: %d dead letter(s) and %d alert(s) past retention removed", letters, alerts)
            async with self.ctx.pool.acquire() as conn:
                keys = await dedup.prune(conn)
            log.debug("sweep: %d deduplication keys past their window removed", keys)
            self._next_round = time.monotonic() + self.interval_s
        return 0  # housekeeping is never "more work waiting": wait for the next check
