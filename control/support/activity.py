"""What ``hookyard up`` shows while it runs: one concise line per event stored and per delivery attempt.

Logged at ``info`` on the logger ``hookyard.activity`` by the flush and deliver loops, only when the
setting ``log_activity`` is on (``hookyard up`` turns it on; a production worker storing thousands of
events a second would rather not), so ``HOOKYARD_LOG_LEVEL=warning`` silences them like any info line and
they share the process's one log format (``shared.logs``). A delivery line names its destination by id and
``safe_url`` (scheme, host, port): the rest of a destination URL is often its secret. An event line shows
its method and ``/`` or ``/…``, never the ingest path or query: they may carry a person's data (a customer
id in the path), and a log line outlives an erasure (``docs/reference/retention.md``).

At most ``LINES_PER_S`` lines of each kind a second: past that, a burst is one summary line a second
("... 3,812 more deliveries in the last second: 3,810 succeeded, 2 failed"). Nobody reads four thousand
lines a second, and formatting and writing them was an eighth of the worker's CPU during a drain
(docs/adr/0042-delivery-cpu-per-send.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Protocol

from control.records.transforms import TransformRecord
from control.records.verdict import verdict_text
from shared.logs import safe_url
from shared.wire import IngestRecord

__all__ = ("LINES_PER_S", "Clock", "LoopClock", "delivered", "enabled", "stored", "use_clock")

log = logging.getLogger("hookyard.activity")

LINES_PER_S = 20
"""Lines of one kind (events, deliveries) shown each second before the rest is summed up."""


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What the windows count seconds by, and how a second's summary is written once the second is over."""

    def now(self) -> float:
        """Seconds, monotonic."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer | None:
        """Calls ``callback`` after ``delay`` seconds; ``None`` when that cannot be arranged."""
        ...


class LoopClock:
    """The process's clock: ``time.monotonic`` and the running event loop's timers. Without a running loop
    (a synchronous caller) no timer is set, and the next line of the kind writes the summary."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer | None:
        try:
            return asyncio.get_running_loop().call_later(delay, callback)
        except RuntimeError:
            return None


class _Window:
    """This second's lines of one kind: how many were shown, and what was held back (and how it went)."""

    __slots__ = ("clock", "held", "held_failed", "label", "plural", "second", "shown", "timer")

    def __init__(self, label: str, plural: str, clock: Clock) -> None:
        self.label, self.plural, self.clock = label, plural, clock
        self.second = -1
        self.shown = self.held = self.held_failed = 0
        self.timer: Timer | None = None

    def admit(self, failed: bool = False) -> bool:
        """True when this line is to be written; False when it is counted into the second's summary."""
        second = int(self.clock.now())
        if second != self.second:
            self.summarise()
            self.second, self.shown = second, 0
        if self.shown < LINES_PER_S:
            self.shown += 1
            return True
        self.held += 1
        self.held_failed += failed
        if self.timer is None:  # the summary is due even when the burst ends with this line
            self.timer = self.clock.call_later(1.0, self.summarise)
        return False

    def admit_many(self, lines: int) -> int:
        """How many of ``lines`` lines (the first ones) are to be written, the rest counted into the second's
        summary: ``admit`` for a flushed batch's events at once. A call per event was 8,900 instructions of
        the flush per event with the window full, against 1,200 for this (ADR 0091)."""
        shown = 0
        while shown < lines and self.admit():  # at most LINES_PER_S turns: the rest are held in one count
            shown += 1
        if shown < lines and (held := lines - shown - 1) > 0:
            self.held += held
        return shown

    def summarise(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.held:
            how = (
                f": {self.held - self.held_failed:,} succeeded, {self.held_failed:,} failed"
                if self.label == "delivery"
                else ""
            )
            log.info("%-9s ... %s more %s in the last second%s", self.label, f"{self.held:,}", self.plural, how)
        self.held = self.held_failed = 0


_events, _deliveries = _Window("event", "events", LoopClock()), _Window("delivery", "deliveries", LoopClock())


def use_clock(clock: Clock) -> None:
    """Counts both kinds of line by ``clock`` from now on, in fresh windows: how a test lets a second pass
    without sleeping through it (``LoopClock()`` is the process's own)."""
    global _events, _deliveries
    _events, _deliveries = _Window("event", "events", clock), _Window("delivery", "deliveries", clock)


def enabled(on: bool) -> bool:
    return on and log.isEnabledFor(logging.INFO)


def stored(
    records: Iterable[IngestRecord], new_ids: Collection[str], traces: Mapping[str, tuple[str, str]] | None = None
) -> None:
    """One line per event of ``records`` that this batch stored (not those already stored before), with the
    event's ids (and its routing span's trace and span ids, from ``traces``, when tracing recorded them).

    ``new_ids`` are ids of ``records`` (each once): the second's window takes them as one count, and
    ``records`` is read only as far as the lines it has room for."""
    room = _events.admit_many(len(new_ids))
    if not room:
        return
    for r in records:
        if r.id in new_ids:
            extra: dict[str, str] = {"event_id": r.id, "endpoint_id": r.endpoint_id}
            if traces and (found := traces.get(r.id)) is not None:
                extra["trace_id"], extra["span_id"] = found
            what = f"{r.provider or '-'} {r.event_type or '-'}"
            blocked = "  blocked by the allowlist" if r.ip_allowed is False else ""
            log.info(
                "event     %s  %s  %s  %s /%s  %s%s",
                r.id,
                r.endpoint_id,
                what,
                r.method,
                "…" if r.path or r.query else "",
                verdict_text(r.signature_valid, r.signature_failure_reason),
                blocked,
                extra=extra,
            )
            room -= 1
            if not room:
                return


def delivered(
    event_id: str,
    destination_id: str,
    url: str,
    attempt: int,
    status: int | None,
    latency_ms: int,
    error: str | None,
    retry_in_s: float | None,
    unsent: TransformRecord | None = None,
    task_status: str | None = None,
) -> None:
    """One attempt's line. ``unsent``: what the transform did when it kept the attempt from being sent (it
    skipped it, failed, was stopped, or never ran): the line says so and how long that took, where "in 0 ms"
    (the send latency of a send that never happened) read as a send after a 1 s stop or a 20 s wait.
    ``task_status``: what the attempt left its task in; a last failure says "gave up" and a 410 "held", where
    the line read like any other failure (only a scheduled retry was said)."""
    if not _deliveries.admit(failed=error is not None):
        return
    then = _THEN.get(task_status or "", "") if retry_in_s is None else f", retry in {retry_in_s:.0f}s"
    if unsent is not None:
        outcome = f"not sent: {_not_sent(unsent)}"
    else:
        outcome = f"{status if status is not None else f'failed: {error}'} in {latency_ms:d} ms"
    log.info(
        "delivery  %s  -> %s %s  %s (attempt %d%s)", event_id, destination_id, safe_url(url), outcome, attempt, then
    )


_THEN = {"failed": ", gave up", "held": ", held: destination disabled"}
"""The end of a failed attempt's line by what it left its task in (``control.delivery.attempt``), when no
retry is scheduled."""


def _not_sent(record: TransformRecord) -> str:
    """What a transform did instead of a send, and after how long (``record.duration_ms``: the call's run, or
    its wait for a sandbox turn when it never ran)."""
    ms = record.duration_ms
    took = f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"
    if record.outcome == "skipped":
        return f"transform skipped it after {took}"
    message = record.error.message if record.error is not None else "failed"
    if message.startswith("stopped: "):  # a limit, a wait for a turn, a process that ended (control.transform)
        return f"transform stopped after {took} ({message.removeprefix('stopped: ')})"
    where = f" (line {record.error.line})" if record.error is not None and record.error.line is not None else ""
    return f"transform failed after {took}: {message}{where}"
