"""A batch's measured time shared among its calls (``share_batch_time``): V8's whole-millisecond readings
plus what they leave out, or, where they read more than the batch took, split by reading plus a tick. Never
0 for a call of a batch that took time, and the calls add up to the batch."""

from __future__ import annotations

import pytest

from control.transform.wire import Run, share_batch_time


@pytest.mark.parametrize(
    ("readings", "elapsed_ms"),
    [
        ([0.0, 0.0, 0.0, 0.0], 0.8),  # quick calls within one tick
        ([1.0, 0.0, 0.0, 0.0], 0.9),  # one crossed a tick: the readings say more than the batch took
        ([1.0, 1.0, 0.0], 1.2),
        ([50.0, 50.0, 51.0], 152.0),  # busy calls: each keeps what it read
    ],
)
def test_every_call_gets_time_and_they_add_up(readings: list[float], elapsed_ms: float) -> None:
    runs = [Run(duration_ms=ms) for ms in readings]
    share_batch_time(runs, elapsed_ms)
    shared = [run.duration_ms for run in runs]
    assert all(ms > 0 for ms in shared), shared
    assert sum(shared) == pytest.approx(elapsed_ms)
    if elapsed_ms >= sum(readings):  # nothing read is taken away
        assert all(ms >= read for ms, read in zip(shared, readings, strict=True)), shared
