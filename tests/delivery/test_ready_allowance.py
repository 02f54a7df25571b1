"""The allowance the deliver loop reads after every send: the sum of each destination's ``ahead``, kept as it
changes rather than summed over every paced destination per send (issue 48: with 10,000 endpoints that sum
was 40 % of the worker's CPU). These hold it to the sum it replaces, on the clock the loop uses."""

from __future__ import annotations

import random

from control.delivery.ready import DEPTH, EXACT_UP_TO, WINDOW_S, Ready

CAP = 4


def _summed(ready: Ready, destinations: list[str], now: float) -> int:
    return sum(ready.ahead(d, now) for d in destinations)


def test_the_allowance_is_the_sum_of_every_destinations_ahead_as_the_clock_moves() -> None:
    """Thousands of destinations finishing sends at random moments, the clock moving by less and more than a
    window: whenever every share was rolled (a look a quarter window or more after the last one), the kept sum
    is the sum of ``ahead`` over every destination, capped per destination and back to 0 for the idle ones."""
    rng = random.Random(48)
    ready = Ready(per_destination=CAP, lease_s=30.0, send_s=10.0)
    destinations = [f"dst_{i}" for i in range(2000)]
    now = 1000.0
    for _ in range(40):
        for _ in range(rng.randrange(0, 400)):
            ready.finished(rng.choice(destinations[:50] if rng.random() < 0.5 else destinations), now)
        now += WINDOW_S / 4 + rng.choice((0.001, 0.01, 0.03, WINDOW_S, 2.5 * WINDOW_S))
        assert ready.allowance(now) == _summed(ready, destinations, now)
    assert max(ready.ahead(d, now) for d in destinations) <= DEPTH * CAP


def test_a_finished_send_counts_at_once_and_an_idle_destination_is_forgotten() -> None:
    """A send's finish adds to the allowance before any look (the loop claims ahead on it right away); two
    windows with nothing finished take the destination's share back out, and its pace is forgotten."""
    ready = Ready(per_destination=CAP, lease_s=30.0, send_s=10.0)
    now = 50.0
    assert ready.allowance(now) == 0
    for _ in range(8):
        ready.finished("dst_a", now)
    ready.finished("dst_b", now)
    assert ready.allowance(now) == 9
    assert ready.allowance(now + 1.5 * WINDOW_S) == 9  # the window before still counts
    assert ready.allowance(now + 3.6 * WINDOW_S) == 0  # two windows since that look, nothing finished
    assert ready.tracked(()) == set()


def test_with_few_destinations_the_allowance_is_exact_at_every_moment() -> None:
    """Up to ``EXACT_UP_TO`` paced destinations every look rolls every pace: the sum is exact whatever the
    clock did since the last look (the loop's figures for a usual worker are those of before)."""
    rng = random.Random(27)
    ready = Ready(per_destination=CAP, lease_s=30.0, send_s=10.0)
    destinations = [f"dst_{i}" for i in range(EXACT_UP_TO)]
    now = 10.0
    for _ in range(300):
        for _ in range(rng.randrange(0, 6)):
            ready.finished(rng.choice(destinations), now)
        now += rng.choice((0.001, 0.01, 0.05, WINDOW_S))
        assert ready.allowance(now) == _summed(ready, destinations, now)
