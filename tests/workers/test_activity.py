"""``hookyard up``'s activity lines under a flood: at most ``LINES_PER_S`` lines of a kind each second, then
one summary line for the rest, written even when the burst ends (nobody reads 4,000 lines a second, and
writing them was an eighth of the worker's CPU during a drain)."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import pytest

from control.workers import activity


async def _start_of_a_second() -> None:
    second = int(time.monotonic())
    while int(time.monotonic()) == second:
        await asyncio.sleep(0.005)


async def test_a_burst_shows_the_first_lines_and_sums_up_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    await _start_of_a_second()
    for i in range(500):  # every tenth failed; the burst takes milliseconds
        failed = i % 10 == 0
        status, error = (None, "connection refused") if failed else (200, None)
        activity.delivered(f"evt_burst_{i}", "dst_1", "https://example.com/hook", 1, status, 3, error, None)
    await asyncio.sleep(1.3)  # no further line: the summary comes from its own timer
    text = [r.getMessage() for r in caplog.records if r.name == "hookyard.activity"]
    shown = [t for t in text if "evt_burst_" in t]
    assert len(shown) == activity.LINES_PER_S
    assert shown[0].startswith("delivery  evt_burst_0  -> dst_1 https://example.com")
    assert "failed: connection refused" in shown[0]
    assert "200 in 3 ms" in shown[1]
    summaries = [t for t in text if re.fullmatch(r"delivery  \.\.\. [\d,]+ more deliveries in the last second: .*", t)]
    # 480 held back; of the 50 failures, 2 (evt 0 and 10) were among the lines shown
    assert "delivery  ... 480 more deliveries in the last second: 432 succeeded, 48 failed" in summaries


async def test_a_steady_trickle_is_shown_line_by_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    await _start_of_a_second()
    for i in range(activity.LINES_PER_S):
        activity.delivered(f"evt_trickle_{i}", "dst_1", "https://example.com/", 1, 204, 1, None, None)
    await asyncio.sleep(1.1)
    text = [r.getMessage() for r in caplog.records if r.name == "hookyard.activity"]
    assert len([t for t in text if "evt_trickle_" in t]) == activity.LINES_PER_S
    assert not [t for t in text if "more deliveries" in t]
