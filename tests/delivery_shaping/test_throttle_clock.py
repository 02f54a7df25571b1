"""The rate limit's clock: Redis's start times placed in the worker's ``time.monotonic()`` neither early nor
late, however long the call took (``control.delivery.throttle.Clock``).

Placed from when the worker asked, a command that reached Redis late (the worker's event loop busy before
writing it, a busy Redis) put every start of its grant early by that delay, onto the starts reserved before
it: a suite run saw 51 starts in a second at a limit of 50. Placed from when the answer was read, an answer
read late put them late, onto the starts reserved after it: 99 in a second. Now a start goes no earlier than
it can be and no later than ``LATE_S`` after; a call too slow to tell gives starts that are reserved again.
"""

from __future__ import annotations

import math
import time

import pytest

from control.db.context import Context
from control.delivery import shaping, throttle
from control.delivery.shaping import LATE_S
from shared import redis_client
from shared.keys import Keys
from tests.delivery_shaping.support import busiest_second
from tests.redis_relay import RedisRelay

RATE = 50
DELAY_S = 0.1


async def test_a_command_that_reaches_redis_late_does_not_move_its_starts_onto_earlier_ones(
    redis_url: str, redis_prefix: str
) -> None:
    """Two workers: one reserves a second of starts, then the other's command reaches Redis 100 ms late. Its
    starts follow the first worker's, one interval after the last, as Redis spaced them; asked-at placement
    put them 100 ms early, 53 starts in a second."""
    key = Keys(redis_prefix).delivery_rate("dst_early")
    late_clock = throttle.Clock()
    quick = await redis_client.open_client(redis_url)
    async with RedisRelay(redis_url) as relay:
        late = await redis_client.open_client(relay.url)
        try:
            # Connected and the script loaded, then the clock learnt from quick calls (on another key).
            for _ in range(3):
                await throttle.reserve(late, key + ":warm", late_clock, rate_per_s=10.0, wanted=1, horizon_s=1.0)
            first = await throttle.reserve(quick, key, throttle.Clock(), rate_per_s=RATE, wanted=100, horizon_s=1.0)
            relay.request_delay_s = DELAY_S
            asked = time.monotonic()
            second = await throttle.reserve(late, key, late_clock, rate_per_s=RATE, wanted=10, horizon_s=2.0)
            assert time.monotonic() - asked >= DELAY_S
        finally:
            await late.aclose()
            await quick.aclose()
    assert (first.count, second.count) == (48, 10)  # 1 s at 95% of 50/s; then 10 more within 2 s
    slots = [first.slot(i, LATE_S) for i in range(first.count)] + [second.slot(i, LATE_S) for i in range(10)]
    # The late call taught its clock nothing new, and the quick calls before it kept it known: usable starts.
    assert second.spread_s < LATE_S, second.spread_s
    # Redis put the second's first start one interval after the first's last. Each start lies in our clock
    # between ``start_at - spread_s`` and ``start_at``; the second's is not placed before the earliest the
    # first's can be plus the interval (asked-at placement put it 100 ms before), nor later than it can be.
    last, after = first.start_at(first.count - 1), second.start_at(0)
    assert after >= last - first.spread_s + first.interval_s - 0.001, (after - last, first.spread_s)
    assert after <= last + first.interval_s + second.spread_s + 0.001, (after - last, second.spread_s)
    assert busiest_second([s.at for s in slots]) <= RATE
    assert busiest_second([s.until for s in slots]) <= RATE


@pytest.mark.parametrize(("request_delay_s", "reply_delay_s"), [(DELAY_S, 0.0), (0.0, 0.3)], ids=["ask", "answer"])
async def test_a_slow_call_gives_starts_neither_early_nor_late(
    redis_url: str, redis_prefix: str, request_delay_s: float, reply_delay_s: float
) -> None:
    """A worker's first call, slow one way or the other: its start may go no earlier than Redis ran the
    script (the key was free) and no later than ``LATE_S`` after."""
    key = Keys(redis_prefix).delivery_rate("dst_clock")
    async with RedisRelay(redis_url) as relay:
        client = await redis_client.open_client(relay.url)
        try:
            await throttle.reserve(client, key + ":warm", throttle.Clock(), rate_per_s=10.0, wanted=1, horizon_s=1.0)
            relay.request_delay_s, relay.reply_delay_s = request_delay_s, reply_delay_s
            asked = time.monotonic()
            grant = await throttle.reserve(client, key, throttle.Clock(), rate_per_s=10.0, wanted=3, horizon_s=1.0)
            answered = time.monotonic()
        finally:
            await client.aclose()
    assert grant.count == 3
    ran_after, ran_before = asked + request_delay_s, answered - reply_delay_s  # when Redis ran the script
    slot = grant.slot(0, LATE_S)
    assert slot.at >= ran_after, (slot.at - asked, answered - asked)
    assert slot.until <= ran_before + LATE_S, (slot.until - asked, answered - asked)


async def test_a_worker_keeps_a_bounded_number_of_clocks(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant can make rate-limited destinations without end: the worker keeps ``CLOCKS`` clocks, the oldest
    made going first, and a destination whose clock went learns it again on its next reservation."""
    monkeypatch.setattr(shaping, "CLOCKS", 2)
    shaper = shaping.Shaper(ctx, horizon_s=1.0)
    for destination_id in ("dst_a", "dst_b", "dst_c"):
        grant = await shaper._reserve(destination_id, RATE, 1)
        assert grant is not None
        assert grant.count == 1
    assert list(shaper._clocks) == ["dst_b", "dst_c"]
    assert await shaper._reserve("dst_a", RATE, 1) is not None
    assert list(shaper._clocks) == ["dst_c", "dst_a"]
    assert shaper._clocks["dst_a"].hi < math.inf  # learnt again from that call
