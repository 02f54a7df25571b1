"""A destination's rate limit, held by two deliver worker processes together while another destination
runs at full speed; and a 429 with Retry-After pausing the whole destination, for every worker (two in
process here, so the test can wait for the 429 to be recorded)."""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from control.db.context import Context
from control.workers.main import worker_context
from shared.settings import Settings
from tests.delivery_shaping.support import busiest_second, limited_tasks, starts
from tests.destination import Destination, Reply, fetch_row, make_task, running, serving
from tests.helpers import (
    fast_delivery_settings,  # noqa: F401 - the fixture settings, with FAST_DELIVERY
    wait_for,
)
from tests.stack import Stack


@pytest.fixture
def limited() -> Iterator[Destination]:
    with serving() as server:
        yield server


@pytest.fixture
def other() -> Iterator[Destination]:
    with serving() as server:
        yield server


# 6 s at the limit: six of a worker's 1 s reservation horizons, each contended by both workers (it was 1,000
# sends, 20 s of waiting that showed nothing more).
RATE, LIMITED = 50, 300


@pytest.mark.slow
async def test_a_limited_destination_gets_its_rate_from_all_workers_and_others_are_not_slowed(
    settings: Settings, ctx: Context, limited: Destination, other: Destination, tmp_path: Path
) -> None:
    slow = await limited_tasks(ctx, limited.url, LIMITED, rate_limit_per_s=float(RATE))
    fast = await limited_tasks(ctx, other.url, 200)
    stack = Stack(
        settings,
        tmp_path,
        HOOKYARD_DELIVER_LEASE_S="5",
        HOOKYARD_DELIVER_TIMEOUT_S="2",
        HOOKYARD_DELIVER_POLL_S="0.2",
        HOOKYARD_DELIVER_SWEEP_S="0.2",
    )
    # The receiver is a thread of this process: a full garbage collection here (a long-lived test process's
    # heap) holds it for a moment, and what arrived meanwhile is timestamped at once. Two suite runs saw 84 and
    # 85 arrivals in a second while the sends started at 49 at most; none runs during the measurement.
    gc.disable()
    try:
        started = time.time()
        stack.start_worker("w1", "deliver")  # two deliver worker processes, one limit
        stack.start_worker("w2", "deliver")
        await other.wait_for(200, timeout=30)
        await limited.wait_for(LIMITED, timeout=60)
    finally:
        gc.enable()
        stack.stop_all()
    arrivals = [r.at for r in limited.requests]
    # What the limiter decides is when sends start (every worker's, from their records): at most the rate in
    # any second. The receiver sees arrivals, which a stall of either side can bunch. Both are checked, and a
    # failure says which bunched.
    sends = await starts(ctx, slow["destination"])
    assert len(sends) == LIMITED
    busiest = {"arrivals": busiest_second(arrivals), "starts": busiest_second(sends)}
    assert busiest["starts"] <= RATE, busiest
    assert busiest["arrivals"] <= RATE + 5, busiest
    assert Counter(r.headers["x-hookyard-event-id"] for r in limited.requests) == Counter(slow["events"])
    assert {r.headers["x-hookyard-event-id"] for r in other.requests} == set(fast["events"])
    # Not slowed, as an order rather than a number of seconds (which a loaded machine stretches): the other
    # destination's 200 are all in before the limited one's 200th arrival, which its limit holds back 4 s.
    assert max(r.at for r in other.requests) < sorted(arrivals)[199]
    assert max(arrivals) - min(arrivals) >= LIMITED / RATE - 1  # the limit spread them: at most 50 in a second
    assert started < min(arrivals)


@pytest.mark.parametrize("rate_limit_per_s", [None, 20.0], ids=["unlimited", "limited"])
async def test_retry_after_pauses_the_whole_destination_for_every_worker(
    ctx: Context, limited: Destination, other: Destination, rate_limit_per_s: float | None
) -> None:
    limited.reply(Reply(status=429, retry_after="2"))
    shaping: dict[str, Any] = {} if rate_limit_per_s is None else {"rate_limit_per_s": rate_limit_per_s}
    paused = await limited_tasks(ctx, limited.url, 1, **shaping)
    async with running(ctx), running(ctx):
        (refused,) = await limited.wait_for(1)
        await _pause_recorded(ctx, paused)  # the 429 is written: both workers know of the pause from here on
        await _more_tasks(ctx, paused, 5)
        unpaused = await limited_tasks(ctx, other.url, 3)
        await other.wait_for(3, timeout=10)
        requests = await limited.wait_for(7, timeout=15)  # the retry and the five new ones
    after = requests[1:]
    assert min(r.at for r in after) >= refused.at + 2 - 0.05
    # Another destination is not held back: all of it arrived during the pause, before its end (2 s after the
    # 429, rather than 1.5 s: a margin a loaded machine took) and before this destination's next request.
    held, resumed = max(r.at for r in other.requests), min(r.at for r in after)
    assert held < refused.at + 2, held - refused.at
    assert held < resumed, (held - refused.at, resumed - refused.at)
    assert {r.headers["x-hookyard-event-id"] for r in other.requests} == set(unpaused["events"])


@pytest.mark.slow
async def test_deliveries_resume_when_a_pause_ends_not_at_the_next_poll(
    settings: Settings, limited: Destination
) -> None:
    """A worker leaves a paused destination out of its claims, and nothing but its poll woke it when the pause
    ended: deliveries resumed up to a poll late. With a 5 s poll, they resume at the pause's end."""
    limited.reply(Reply(status=429, retry_after="1"))
    slow = msgspec.structs.replace(settings, deliver_poll_s=5.0, retry_schedule_s=(10.0, 10.0))
    async with worker_context(slow) as ctx:  # the refused one's retry is not what ends the wait
        paused = await limited_tasks(ctx, limited.url, 1)
        async with running(ctx):
            (refused,) = await limited.wait_for(1)
            await _pause_recorded(ctx, paused)
            await _more_tasks(ctx, paused, 5)
            requests = await limited.wait_for(6, timeout=4)  # the five new ones (the retry comes later)
    after = requests[1:]
    assert min(r.at for r in after) >= refused.at + 1 - 0.05
    assert max(r.at for r in after) < refused.at + 2.5, [r.at - refused.at for r in after]


async def _pause_recorded(ctx: Context, made: dict[str, Any]) -> None:
    """Until the 429 of ``made``'s destination is written (its ``paused_until`` set)."""

    async def recorded() -> Any:
        return await fetch_row(
            ctx,
            "SELECT paused_until FROM destinations WHERE id = $1 AND paused_until IS NOT NULL",
            made["destination"],
        )

    await wait_for(recorded)


async def _more_tasks(ctx: Context, made: dict[str, Any], count: int) -> None:
    """``count`` more events with a task for ``made``'s destination."""
    for _ in range(count):
        await make_task(ctx, "", endpoint_id=made["endpoint"], destination_id=made["destination"])
