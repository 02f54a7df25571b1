"""A delivery's transform record times the call (``duration_ms``), also when the deliveries of a destination
run their transform together, one batch of the sandbox pool: a quick call once recorded 0.0 there (V8's
clock reads whole milliseconds). A real deliver worker and sandbox pool, a loopback destination."""

from __future__ import annotations

import msgspec
import pytest

from control.db.context import Context
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, make_task, running, settled
from tests.transform.delivering import add_destination, delivery_row

BUSY = """function handler(request) {
  const until = Date.now() + 50;
  while (Date.now() < until) {}
  return request;
}"""

QUICK = "function handler(request) { return request; }"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY)


async def _durations(ctx: Context, client, account, url: str, source: str, count: int) -> list[float]:
    """``count`` deliveries of a destination of ``source``, due before the worker starts (claimed together):
    each one's recorded ``duration_ms``, stored and as /v1 answers it."""
    endpoint, dst, _ = await add_destination(client, account, url, source)
    made = [await make_task(ctx, url, endpoint_id=endpoint, destination_id=dst) for _ in range(count)]
    async with running(ctx):
        for m in made:
            await settled(ctx, m["task"], "succeeded")
    durations = []
    for m in made:
        record = (await delivery_row(ctx, m["task"]))["transform"]
        assert record["outcome"] == "applied", record
        answered = (await client.get(f"/v1/events/{m['event']}", headers=account.headers)).json()
        assert answered["deliveries"][0]["transform"]["duration_ms"] == record["duration_ms"]
        durations.append(record["duration_ms"])
    return durations


async def test_a_quick_transform_claimed_with_others_records_time_not_zero(
    ctx: Context, client, account, destination
) -> None:
    durations = await _durations(ctx, client, account, destination.url, QUICK, 4)
    assert all(0 < ms < 1000 for ms in durations), durations


async def test_a_transform_that_busy_waits_50_ms_records_about_that(ctx: Context, client, account, destination) -> None:
    alone = await _durations(ctx, client, account, destination.url, BUSY, 1)
    together = await _durations(ctx, client, account, destination.url, BUSY, 3)
    # Date.now() reads whole milliseconds: a wait that starts late in one (t0 + 0.9) ends at t0 + 50, so it
    # spends more than 49 ms but may spend less than 50 (49.886 once in a suite run).
    assert all(49 <= ms < 1000 for ms in alone + together), (alone, together)
