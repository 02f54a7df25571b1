"""The discipline every worker loop shares (after arq's worker): bounded work per step, a stop event that
SIGTERM sets, a drain of the step in progress, and a burst mode that returns once there is nothing to do
(which is how tests run a loop to completion without sleeps).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Iterator
from typing import Protocol

from control.db.faults import backoff_s
from shared.errors import HookyardError

__all__ = ("WORKER_GC_THRESHOLD", "Loop", "frozen_start", "install_signal_handlers", "run_loops")

log = logging.getLogger("hookyard.worker")

WORKER_GC_THRESHOLD = 100_000
"""Allocations between collections of the youngest generation while a worker runs its loops (Python's default:
700), as the edge's ``EDGE_GC_THRESHOLD``. A delivery allocates a few hundred short-lived objects (its task,
request, headers, outcome, record row) and hundreds are in flight at once, so at 700 the youngest generation
was collected every few deliveries, each collection scanning the in-flight ones and promoting them to be
scanned again. Figures: docs/adr/0071-worker-cpu-per-delivery.md."""


class Loop(Protocol):
    name: str
    idle_s: float
    """How long to wait before the next step after a step that found nothing to do."""

    async def step(self) -> int:
        """Do one bounded unit of work; return how many items it handled (0 means idle)."""
        ...


async def _run_one(loop: Loop, stop: asyncio.Event, burst: bool) -> None:
    failures = 0
    while not stop.is_set():
        try:
            done = await loop.step()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a loop survives its own failures and retries with backoff, however long
            failures += 1
            if burst:
                raise
            # Capped and jittered: an outage's end is noticed within seconds, and the workers waking from it
            # do not all hit the recovering server at once. The first failure of a run is logged with its
            # traceback, the rest as one line each.
            delay = backoff_s(failures)
            if failures == 1:
                log.exception("%s: step failed; retrying in %.1fs", loop.name, delay)
            else:
                log.warning(
                    "%s: step failed %d times in a row (%s: %s); retrying in %.1fs",
                    loop.name,
                    failures,
                    type(exc).__name__,
                    exc,
                    delay,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            continue
        if failures:
            log.info("%s: recovered after %d failed steps", loop.name, failures)
            failures = 0
        if done == 0:
            if burst:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), loop.idle_s)


@contextlib.contextmanager
def frozen_start() -> Iterator[None]:
    """What start-up made (modules, pools, caches) lives as long as the worker: frozen, full collections stop
    scanning it, as control and the edge do. Each flushed event leaves a few hundred short-lived objects, so
    full collections come every second or so; unfrozen they took a fifth of a flush worker's time (bench
    flush: +14% events/s frozen, docs/adr/0010-freeze-the-startup-heap.md). Undone on exit: a worker run
    inside a test process leaves the interpreter as it found it. The youngest generation is collected every
    ``WORKER_GC_THRESHOLD`` allocations meanwhile (the older ones keep theirs), restored the same way."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(WORKER_GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


async def run_loops(loops: list[Loop], stop: asyncio.Event, *, burst: bool = False) -> None:
    """Runs the loops until ``stop`` is set (or, in burst mode, until each is idle). A loop's own error (a burst
    step's ``ConfigError``: no key to open a sealed secret) is raised as itself, not inside the task group's
    ``ExceptionGroup``, so the command says it in one line as it says any other setting's error: it was a
    48-line traceback ending with that line."""
    try:
        async with asyncio.TaskGroup() as group:
            for loop in loops:
                group.create_task(_run_one(loop, stop, burst), name=f"loop:{loop.name}")
            if not burst:
                group.create_task(_tell_stopping(loops, stop), name="loop:stopping")
    except ExceptionGroup as failed:
        ours, _ = failed.split(HookyardError)
        if ours is None:
            raise
        raise _first(ours) from failed


def _first(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and group.exceptions:
        group = group.exceptions[0]
    return group


async def _tell_stopping(loops: list[Loop], stop: asyncio.Event) -> None:
    """A loop whose step waits on a wakeup of its own (deliver: its poll) is told of the stop (``stopping``), so
    its step ends now: SIGTERM stopped an idle deliver worker only at its next poll, up to ``deliver_poll_s``
    later. The other loops wait on ``stop`` itself, or block for a bounded moment (flush: 250 ms)."""
    await stop.wait()
    for loop in loops:
        stopping = getattr(loop, "stopping", None)
        if stopping is not None:
            stopping()


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT stop taking new work; the step in progress finishes (drain)."""
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, _stop_on, sig, stop)


def _stop_on(sig: signal.Signals, stop: asyncio.Event) -> None:
    """Said once, at the first signal: an operator's SIGTERM was followed by nothing in the log until the exit."""
    if not stop.is_set():
        log.info("worker: %s: stopping; nothing new is taken, work in flight drains", sig.name)
    stop.set()
