"""While a worker runs its loops the youngest generation is collected every ``WORKER_GC_THRESHOLD``
allocations, not Python's 700 (ADR 0071); a worker run inside a test process leaves the thresholds as it found
them."""

from __future__ import annotations

import gc

from control.workers.loop import WORKER_GC_THRESHOLD, frozen_start


def test_the_youngest_generation_is_collected_less_often_while_the_loops_run() -> None:
    before = gc.get_threshold()
    with frozen_start():
        assert gc.get_threshold() == (WORKER_GC_THRESHOLD, *before[1:])
        assert before[0] < WORKER_GC_THRESHOLD
    assert gc.get_threshold() == before


def test_the_thresholds_are_restored_when_the_loops_fail() -> None:
    before = gc.get_threshold()
    try:
        with frozen_start():
            raise RuntimeError("a loop failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
