"""The rate limit's clock: a reservation's start times are placed in the worker's clock from when the worker
asked, not from when the answer was read. An answer read late (the worker's event loop stalled by CPU
contention or a long collection) would otherwise shift every start of the grant later by the stall, onto
the starts other workers reserved after it: at 50/s, a second at the destination then held 99 (a full run of
the suite on a loaded machine). Asked-at placement makes such starts late instead, and a late start is
reserved again (``control.delivery.shaping.LATE_S``)."""

from __future__ import annotations

import time

from control.delivery import throttle
from shared import redis_client
from shared.keys import Keys
from tests.redis_relay import RedisRelay

REPLY_DELAY_S = 0.3


async def test_a_late_answer_does_not_move_the_starts_later(redis_url: str, redis_prefix: str) -> None:
    key = Keys(redis_prefix).delivery_rate("dst_clock")
    async with RedisRelay(redis_url, reply_delay_s=REPLY_DELAY_S) as slow:  # a loop too busy to read at once
        client = await redis_client.open_client(slow.url)
        try:
            # Connected and the script loaded (one reservation on another key) before the measured call.
            await throttle.reserve(client, key + ":warm", rate_per_s=10.0, wanted=1, horizon_s=1.0)
            asked = time.monotonic()
            grant = await throttle.reserve(client, key, rate_per_s=10.0, wanted=3, horizon_s=1.0)
            answered = time.monotonic()
        finally:
            await client.aclose()
    assert answered - asked >= REPLY_DELAY_S
    assert grant.count == 3
    # The key was free: Redis placed the first start at the moment the script ran, within the call.
    assert grant.first_at <= asked + REPLY_DELAY_S / 3, (grant.first_at - asked, answered - asked)
    assert grant.first_at >= asked - 0.001
