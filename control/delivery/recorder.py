"""Bookkeeping of finished attempts, written in batches (group commit).

Each finished attempt is queued in memory; one writer task writes everything queued in one transaction
(the ``deliveries`` rows, the task results, the circuit updates), then everything queued meanwhile, and so
on. At a few thousand attempts a second that is a few dozen transactions instead of thousands, and a lone
attempt is written at once (no added delay).

What a crash costs: attempts queued but not yet written. Their tasks are still ``in_flight``, so they are
retried once the lease expires: deliveries stay at-least-once, the lost attempts' rows are the only gap.
A transient failure (Postgres away, a deadlock) keeps the batch and retries it; any other failure is
logged and drops the batch, whose tasks are retried after their lease. The deliver loop claims nothing
while a worker's worth of results waits here, which bounds memory during an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from control.db import circuit as db_circuit
from control.db import delivery_records
from control.db import tasks as db_tasks
from control.delivery.circuit import summarize
from control.service import Context

__all__ = ("Attempt", "Recorder")

log = logging.getLogger("hookyard.worker.deliver")

# Worth trying the same batch again: Postgres away or restarting, out of connections, a lost race.
_TRANSIENT = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.TransactionRollbackError,
    asyncpg.OperatorInterventionError,
    asyncpg.InsufficientResourcesError,
)


@dataclass(slots=True)
class Attempt:
    task_id: str
    attempts: int
    """The task's attempt counter when it was claimed (the fencing token)."""
    status: str
    """What the task becomes: succeeded, failed, or pending (retry in ``retry_in_s``)."""
    retry_in_s: float | None
    last_error: str | None
    destination_id: str
    success: bool
    delivery: tuple[object, ...]
    """The ``deliveries`` row in ``delivery_records.COLUMNS`` order."""


class Recorder:
    def __init__(self, ctx: Context, *, on_written: Callable[[bool], None] | None = None) -> None:
        self.ctx = ctx
        self.on_written = on_written
        self.failing: Counter[str] = Counter()
        """Destinations with failed attempts not yet written: their circuit state is not current, so the
        deliver loop takes none of their tasks until it is (a down destination cannot soak up a burst of
        claims before its circuit opens)."""
        self._queue: list[Attempt] = []
        self._writer: asyncio.Task[None] | None = None

    def add(self, attempt: Attempt) -> None:
        """Queues a finished attempt; never blocks (so a cancelled send cannot lose one half-written)."""
        self._queue.append(attempt)
        if not attempt.success:
            self.failing[attempt.destination_id] += 1
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_all(), name="deliver:recorder")

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def drain(self, timeout_s: float) -> None:
        """Waits until everything queued is written (or ``timeout_s``, after which the rest is abandoned
        to the lease expiry)."""
        writer = self._writer
        if writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(writer), timeout_s)
        if not writer.done():
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
            log.warning("deliver: %d attempt results not written; their tasks retry after the lease", self.queued)

    async def _write_all(self) -> None:
        failures = 0
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                await self._write(batch)
                failures = 0
            except _TRANSIENT as exc:  # keep the batch and try again
                failures += 1
                self._queue[:0] = batch
                delay = min(5.0, 0.05 * 2**failures)
                log.warning("deliver: writing %d results failed (%s); retrying in %.2fs", len(batch), exc, delay)
                await asyncio.sleep(delay)
                continue
            except Exception:
                log.exception("deliver: %d attempt results not written; their tasks retry after the lease", len(batch))
            had_failures = any(not a.success for a in batch)
            if had_failures:
                self.failing.subtract(a.destination_id for a in batch if not a.success)
                self.failing = +self.failing  # drop the zeros
            if self.on_written is not None:
                self.on_written(had_failures)

    async def _write(self, batch: list[Attempt]) -> None:
        succeeded, failed = summarize((a.destination_id, a.success) for a in batch)
        async with self.ctx.pool.acquire() as conn, conn.transaction():
            await delivery_records.insert_many(conn, [a.delivery for a in batch])
            await db_tasks.finish(conn, [(a.task_id, a.attempts, a.status, a.retry_in_s, a.last_error) for a in batch])
            opened = await db_circuit.record_outcomes(
                conn, succeeded=succeeded, failed=failed, threshold=self.ctx.settings.circuit_failure_threshold
            )
        for destination_id in opened:
            log.warning(
                "deliver: circuit of %s opened after %d consecutive failures; its tasks wait %gs for a probe",
                destination_id,
                self.ctx.settings.circuit_failure_threshold,
                self.ctx.settings.circuit_cooldown_s,
            )
