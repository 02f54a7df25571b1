"""``hookyard up``'s activity lines under a flood: at most ``LINES_PER_S`` lines of a kind each second, then
one summary line for the rest, written even when the burst ends (nobody reads 4,000 lines a second, and
writing them was an eighth of the worker's CPU during a drain).

Time passes on a clock of the test's own (``activity.use_clock``): a second goes by when the test says so, not
by sleeping through it, and the summary's timer fires exactly then."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from control.support import activity
from tests.conftest import ingest_record


@dataclass
class _Timer:
    due: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class ManualClock:
    """A monotonic clock that moves only by ``advance``, running the timers that fall due on the way."""

    time: float = 1000.0  # the start of a second
    timers: list[_Timer] = field(default_factory=list)

    def now(self) -> float:
        return self.time

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(self.time + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.time += seconds
        while due := [t for t in self.timers if t.due <= self.time and not t.cancelled]:
            timer = min(due, key=lambda t: t.due)
            self.timers.remove(timer)
            timer.callback()


@pytest.fixture
def clock() -> Iterator[ManualClock]:
    manual = ManualClock()
    activity.use_clock(manual)
    yield manual
    activity.use_clock(activity.LoopClock())


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "hookyard.activity"]


def test_a_burst_shows_the_first_lines_and_sums_up_the_rest(
    caplog: pytest.LogCaptureFixture, clock: ManualClock
) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    for i in range(500):  # every tenth failed, all within one second
        failed = i % 10 == 0
        status, error = (None, "connection refused") if failed else (200, None)
        activity.delivered(f"evt_burst_{i}", "dst_1", "https://example.com/hook", 1, status, 3, error, None)
    assert not [t for t in _lines(caplog) if "more deliveries" in t], "the summary waits for the second's end"
    clock.advance(1.0)  # no further line: the summary comes from its own timer
    text = _lines(caplog)
    shown = [t for t in text if "evt_burst_" in t]
    assert len(shown) == activity.LINES_PER_S
    assert shown[0].startswith("delivery  evt_burst_0  -> dst_1 https://example.com")
    assert "failed: connection refused" in shown[0]
    assert "200 in 3 ms" in shown[1]
    summaries = [t for t in text if re.fullmatch(r"delivery  \.\.\. [\d,]+ more deliveries in the last second: .*", t)]
    # 480 held back; of the 50 failures, 2 (evt 0 and 10) were among the lines shown
    assert summaries == ["delivery  ... 480 more deliveries in the last second: 432 succeeded, 48 failed"]


def test_a_steady_trickle_is_shown_line_by_line(caplog: pytest.LogCaptureFixture, clock: ManualClock) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    for second in range(3):
        for i in range(activity.LINES_PER_S):
            activity.delivered(f"evt_trickle_{second}_{i}", "dst_1", "https://example.com/", 1, 204, 1, None, None)
        clock.advance(1.0)
    text = _lines(caplog)
    assert len([t for t in text if "evt_trickle_" in t]) == 3 * activity.LINES_PER_S
    assert not [t for t in text if "more deliveries" in t]


def test_the_next_second_starts_a_fresh_window(caplog: pytest.LogCaptureFixture, clock: ManualClock) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    for i in range(activity.LINES_PER_S + 5):
        activity.delivered(f"evt_first_{i}", "dst_1", "https://example.com/", 1, 204, 1, None, None)
    clock.advance(1.0)
    activity.delivered("evt_next", "dst_1", "https://example.com/", 1, 204, 1, None, None)
    text = _lines(caplog)
    assert "delivery  ... 5 more deliveries in the last second: 5 succeeded, 0 failed" in text
    assert any("evt_next" in t for t in text), "a new second shows its lines again"


async def test_the_process_clock_sets_the_summary_timer_on_the_running_loop() -> None:
    fired = asyncio.Event()
    assert activity.LoopClock().call_later(0.0, fired.set) is not None
    await asyncio.wait_for(fired.wait(), 5)


def test_without_a_running_loop_no_timer_is_set() -> None:
    assert activity.LoopClock().call_later(1.0, lambda: None) is None


def test_a_flushed_batch_takes_the_window_once(caplog: pytest.LogCaptureFixture, clock: ManualClock) -> None:
    """A batch's new events fill the second's window in one count (``stored`` reads the records only as far as
    the lines it shows): the first new ones are shown in order, an event already stored is neither shown nor
    counted, and the summary counts the rest; a second batch in the same second is counted whole."""
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    records = [ingest_record("ep_1", id=f"evt_batch_{i}") for i in range(30)]
    new_ids = {r.id for r in records if r.id != "evt_batch_1"}  # one was stored by an earlier flush
    activity.stored(records, new_ids)
    activity.stored([ingest_record("ep_1", id="evt_late")], {"evt_late"})
    clock.advance(1.0)
    text = _lines(caplog)
    shown = [t.split()[1] for t in text if t.startswith("event     evt_")]
    assert shown == ["evt_batch_0", *(f"evt_batch_{i}" for i in range(2, activity.LINES_PER_S + 1))]
    assert "event     ... 10 more events in the last second" in text
