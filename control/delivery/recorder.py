"""Bookkeeping of finished attempts, written in batches (group commit), one bad record isolated.

Each finished attempt is queued in memory; one writer task writes everything queued in one transaction
(the ``deliveries`` rows, the task results, the circuit updates), then everything queued meanwhile, and so
on. At a few thousand attempts a second that is a few dozen transactions instead of thousands, and a lone
attempt is written at once (no added delay); a write that follows the previous one closely gathers for up to
``GATHER_S`` first, unless what is queued must not wait (docs/adr/0060-sandbox-calls-pipelined-pristine-and-parked.md).

A failed write is judged by ``control.db.faults``, and only two answers exist:

- **The record's fault** (the data cannot be stored): the batch is split in halves, and halves again,
  until the single bad attempt is found; every other attempt is written normally. The bad attempt's task
  result (succeeded, failed, or pending with its retry) is always written: with its delivery row reduced
  to what can be stored (``delivery_records.reduced``: ids and outcome, no headers or bodies) or left out,
  and should its ``last_error`` be what is refused, with a placeholder instead; each fallback is logged (in
  the worst case, a bug of ours, the task is left to its lease and the log says so). So one unwritable
  result never drops the others' records, and never leaves a task in flight to be sent again.
- **The infrastructure's** (Postgres away, refusing, restarting, killing backends, a deadlock, anything
  unrecognised): the batch is kept and written again after ``faults.backoff_s``, for as long as it takes.
  Meanwhile :attr:`Recorder.stalled` is set and the deliver loop neither sweeps nor claims.

Rows are inserted idempotently (``ON CONFLICT (id) DO NOTHING``): a batch whose COMMIT went through but
whose answer was lost is simply written again; task results are fenced on the attempt number, so writing
one twice changes nothing that matters (a retry's due time is set again).

What a crash costs: attempts queued but not yet written. Their tasks are still ``in_flight``, so they are
retried once the lease expires: deliveries stay at-least-once, the lost attempts' rows are the only gap.
The deliver loop claims less once more than its concurrency in results waits here, and nothing at three
times that or while writes fail (``stalled``), which bounds memory during an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from control.db import circuit as db_circuit
from control.db import delivery_records, destination_state
from control.db import tasks as db_tasks
from control.db.context import Context
from control.db.faults import backoff_s, describe, is_record_fault
from control.delivery.circuit import summarize

__all__ = ("RETRY_CAP_S", "Attempt", "Recorder")

log = logging.getLogger("hookyard.worker.deliver")

RETRY_CAP_S = 5.0
"""Longest wait between two tries of a batch the infrastructure refused: once Postgres is back, every
recorder has written what it held within about this long (the deliver loop's sweep relies on it)."""

GATHER_S = 0.02
"""A write that follows the previous one's start by less than this waits until then, unless ``GATHER_ROWS``
results or one that must not wait are queued: results arriving while the last write ran make the next batch.
Each write has a fixed cost in the worker and in Postgres (one large statement), and when writes go out as
fast as they finish, a worker whose results arrive spread out (a transform's: ADR 0060) wrote three times as
many batches per delivery as a plain one, a third of the size."""
GATHER_ROWS = 64

_UNSTORED_RESULT = "attempt finished, but its result could not be stored as it was (see the worker log)"


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
    circuit: bool = True
    """Whether it tells about the destination's health (a transform that failed or skipped does not)."""
    pause_s: float | None = None
    """The destination answered 429 or 503 with ``Retry-After``: no delivery to it for this long."""
    ordered: bool = False
    """A FIFO task: once its result is written as final, the next task of its line may go."""
    disable: str | None = None
    """The destination answered 410 Gone: disabled with this reason, its tasks held (the task itself too)."""

    @property
    def may_wait(self) -> bool:
        """Whether its write may wait for others (``Recorder.GATHER_S``): not when a destination's other
        tasks, the next of a FIFO line or a pause wait for it."""
        return self.success and not self.ordered and self.pause_s is None and self.disable is None

    @property
    def holds_back(self) -> bool:
        """Whether the destination's other tasks wait until this result is written: a failure the circuit
        counts, or a 410 that disables the destination."""
        return not self.success and (self.circuit or self.disable is not None)


class Recorder:
    def __init__(self, ctx: Context, *, on_written: Callable[[bool, bool], None] | None = None) -> None:
        self.ctx = ctx
        self.on_written = on_written
        self.failing: Counter[str] = Counter()
        """Destinations with failed attempts not yet written: their circuit state is not current, so the
        deliver loop takes none of their tasks until it is (a down destination cannot soak up a burst of
        claims before its circuit opens)."""
        self.stalled = False
        """The last write failed for the infrastructure and its batch waits for the next try."""
        self.failed_at = float("-inf")
        """``time.monotonic()`` of the last such failure."""
        self._queue: list[Attempt] = []
        self._held: list[list[Attempt]] = []
        """Batches taken from the queue and not yet written, the next one last: a batch being retried, or
        the halves of one being searched for its bad attempt."""
        self._writing: list[Attempt] = []
        """The batch whose write is under way: not written yet either, so still counted in ``queued`` and kept
        out of the sweep by ``task_ids`` (a write waiting on a refused or slow Postgres can take seconds)."""
        self._writer: asyncio.Task[None] | None = None
        self._began = float("-inf")
        """``time.monotonic()`` the last write began."""
        self._now = asyncio.Event()
        """Set when what is queued should be written without gathering more (``GATHER_S``)."""

    def add(self, attempt: Attempt) -> None:
        """Queues a finished attempt; never blocks (so a cancelled send cannot lose one half-written)."""
        self._queue.append(attempt)
        if attempt.holds_back:
            self.failing[attempt.destination_id] += 1
        if len(self._queue) >= GATHER_ROWS or not attempt.may_wait:
            self._now.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_all(), name="deliver:recorder")

    @property
    def queued(self) -> int:
        """Results not yet written."""
        return len(self._queue) + len(self._writing) + sum(len(b) for b in self._held)

    def task_ids(self) -> Iterator[str]:
        """The tasks whose results wait here (still ``in_flight`` in Postgres, and not lost)."""
        for batch in (self._queue, self._writing, *self._held):
            for attempt in batch:
                yield attempt.task_id

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
        while self._held or self._queue:
            if not self._held:
                await self._gather()
                self._held.append(self._queue)
                self._queue = []
            batch = self._writing = self._held.pop()
            try:
                done = await self._write_isolating(batch)
            except asyncio.CancelledError:
                self._held.append(batch)
                self._writing = []
                raise
            except Exception as exc:  # not the record's fault: keep the batch and try it again
                self._held.append(batch)
                self._writing = []
                failures += 1
                self.stalled, self.failed_at = True, time.monotonic()
                delay = backoff_s(failures, cap_s=RETRY_CAP_S)
                log.warning(
                    "deliver: writing %d results failed (%s: %s); retrying in %.2fs",
                    len(batch),
                    type(exc).__name__,
                    exc,
                    delay,
                    exc_info=failures == 1,
                )
                await asyncio.sleep(delay)
                continue
            self._writing = []  # written, or split into halves held for their own writes
            if failures:
                log.info("deliver: attempt results written again after %d failed tries", failures)
            failures, self.stalled = 0, False
            if done:
                self._finished(batch)

    async def _gather(self) -> None:
        """Waits, within ``GATHER_S`` of the last write's start, for more results to write with those queued."""
        wait_s = self._began + GATHER_S - time.monotonic()
        if wait_s > 0 and not self._now.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._now.wait()
        self._now.clear()
        self._began = time.monotonic()

    async def _write_isolating(self, batch: list[Attempt]) -> bool:
        """Writes the batch, or on a record fault splits it (False: its halves are held, not yet written)
        or, for a single attempt, writes what of it can be stored. Infrastructure failures raise."""
        try:
            await self._write(batch)
        except Exception as exc:
            if not is_record_fault(exc):
                raise
            if len(batch) > 1:
                half = len(batch) // 2
                self._held += [batch[half:], batch[:half]]
                return False
            await self._write_alone(batch[0], exc)
        return True

    async def _write_alone(self, attempt: Attempt, fault: BaseException) -> None:
        """The one attempt whose write the database refused: its result with less and less of its record,
        first without the row's free-form parts, then without the row, then with a placeholder error."""
        reasons = [describe(fault)]
        row = delivery_records.reduced(attempt.delivery, reasons[0])
        plain = dataclasses.replace(attempt, last_error=_UNSTORED_RESULT)
        for what, result, rows in (
            ("with its delivery record reduced", attempt, [row]),
            ("without its delivery record", attempt, []),
            ("with its delivery record reduced and a placeholder error", plain, [row]),
            ("without its delivery record and with a placeholder error", plain, []),
        ):
            try:
                await self._write([result], rows=rows)
            except Exception as exc:
                if not is_record_fault(exc):
                    raise
                reasons.append(describe(exc))
                continue
            log.error("deliver: task %s result written %s (%s)", attempt.task_id, what, "; ".join(reasons))
            return
        # Only values hookyard made itself were left, so this is a bug of ours, not the record's.
        log.error(
            "deliver: task %s result could not be written at all (%s); it is retried after its lease",
            attempt.task_id,
            "; ".join(reasons),
        )

    def _finished(self, batch: list[Attempt]) -> None:
        had_failures = any(a.holds_back for a in batch)
        if had_failures:
            self.failing.subtract(a.destination_id for a in batch if a.holds_back)
            self.failing = +self.failing  # drop the zeros
        if self.on_written is not None:
            released = any(a.ordered and a.status != "pending" for a in batch)
            self.on_written(had_failures, released)

    async def _write(self, batch: Sequence[Attempt], *, rows: Sequence[tuple[object, ...]] | None = None) -> None:
        """One transaction: the batch's delivery rows (``rows`` instead, when given), task results and
        circuit outcomes; a single statement when no attempt counts against a circuit and none asked for a
        pause (the circuit's failure path locks its destinations in id order first)."""
        succeeded, failed = summarize((a.destination_id, a.success) for a in batch if a.circuit)
        records = [a.delivery for a in batch] if rows is None else rows
        results = [(a.task_id, a.attempts, a.status, a.retry_in_s, a.last_error) for a in batch]
        pauses = {a.destination_id: a.pause_s for a in batch if a.pause_s}
        gone = [(a.destination_id, a.disable, "gone") for a in batch if a.disable is not None]
        opened: list[tuple[str, str]] = []
        disabled: list[str] = []
        async with self.ctx.pool.acquire() as conn:
            if not failed and not pauses and not gone:  # the usual batch: one statement (delivery_records.write)
                await delivery_records.write(conn, records, results, succeeded)
            else:
                async with conn.transaction():
                    await delivery_records.insert_many(conn, records)
                    await db_tasks.finish(conn, results)
                    opened = await db_circuit.record_outcomes(
                        conn, succeeded=succeeded, failed=failed, threshold=self.ctx.settings.circuit_failure_threshold
                    )
                    if pauses:
                        await db_circuit.pause(conn, pauses)
                    if gone:
                        disabled = await destination_state.disable(conn, gone)
        for destination_id in disabled:
            log.warning(
                "deliver: %s answered 410 Gone; disabled, its deliveries held until it is enabled", destination_id
            )
        for destination_id, was in opened:
            # Opening is news, once per outage; a failed probe (half_open -> open) is the outage going on, every
            # cool-down, so it goes to debug: at warning it repeated "opened" every 30 s for as long as it lasted.
            if was == "half_open":
                log.debug(
                    "deliver: probe of %s failed; its circuit stays open, next probe in %gs",
                    destination_id,
                    self.ctx.settings.circuit_cooldown_s,
                )
                continue
            log.warning(
                "deliver: circuit of %s opened after %d consecutive failures; its tasks wait %gs for a probe",
                destination_id,
                self.ctx.settings.circuit_failure_threshold,
                self.ctx.settings.circuit_cooldown_s,
            )
