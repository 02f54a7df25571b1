"""The fault ledger as tests: ``bench faults``' scenarios, shorter, on the same production topology
(separate edge, control, flush, deliver and sweep processes on private Postgres and Redis, a real sink).

Every outage here outlasts every limit it is about: the flush's takeover idle time (1 s), the delivery lease
(3 s), the backoff cap (5 s) and the dead-letter limit the flush used to have (5 reads): the test checks the
workers' own logs for more consecutive failed steps than that, so a shortened outage cannot pass unnoticed.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator

import httpx
import pytest

from bench.chaos import Load, Target, Topology, provision, topology
from bench.faults import Outcome, run_scenario
from bench.ledger import settle

pytestmark = pytest.mark.slow

SETTINGS = {
    "flush_claim_idle_ms": 1000,
    "deliver_lease_s": 3,
    "deliver_timeout_s": 2,
    "deliver_connect_timeout_s": 1,
    "circuit_cooldown_s": 1,
    "retry_schedule_s": "1,2,4,8,16,32",
}
OUTAGE_S = 6.0
"""Postgres away: past the backoff cap (5 s), and long enough for more than 5 failed steps in a row."""
RATE = 100.0
CALM_S = 1.0
"""Load before and after each fault: 100 requests either side, enough for the fault to land mid-load and for
the load to meet the recovered service; the outages themselves, the limits' worth, are not shortened."""
SERVED_AGAIN_S = 4.0
"""Redis back (1.2 s down) to the first acknowledged request: the sweep's check interval (1 s) and the
backoff its loop reached during the outage (at most 1.6 s), with room for a loaded machine."""


@pytest.fixture(scope="module")
def top() -> Iterator[tuple[Topology, list[Target]]]:
    with topology(aof=True, **SETTINGS) as topo:
        yield topo, asyncio.run(provision(topo))


async def _scenario(top: tuple[Topology, list[Target]], name: str, *, seconds: float = OUTAGE_S) -> Outcome:
    topo, targets = top
    outcome = await run_scenario(topo, targets, name, seconds=seconds, rate_per_s=RATE, calm_s=CALM_S, settle_s=90.0)
    ledger = outcome.ledger
    assert not topo.exited(), topo.exited()  # every process outlived the fault (the killed one restarted)
    assert ledger.acked > 0
    assert ledger.lost <= outcome.window, outcome.line()
    assert ledger.duplicated == 0, outcome.line()
    assert ledger.delivered == ledger.acked, outcome.line()
    assert ledger.dead_letters == 0, outcome.line()
    return outcome


def _log_size(topo: Topology, process: str) -> int:
    return (topo.root / f"{process}.log").stat().st_size


def _most_failures_in_a_row(topo: Topology, process: str, since: int) -> int:
    """The longest run of failed steps the process logged after byte ``since`` of its log."""
    with (topo.root / f"{process}.log").open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return max((int(n) for n in re.findall(r"step failed (\d+) times in a row", text)), default=0)


@pytest.mark.parametrize("process", ["edge", "flush", "deliver"])
async def test_a_process_killed_mid_load(top: tuple[Topology, list[Target]], process: str) -> None:
    outcome = await _scenario(top, f"{process}_killed")
    if process != "edge":
        assert outcome.ledger.sent == outcome.ledger.acked  # the edge kept answering


@pytest.mark.parametrize("way", ["pg_refused", "pg_backends_killed", "pg_restart"])
async def test_a_postgres_outage_longer_than_every_limit(top: tuple[Topology, list[Target]], way: str) -> None:
    since = _log_size(top[0], "flush")
    outcome = await _scenario(top, way)
    assert outcome.ledger.sent == outcome.ledger.acked  # the edge never needed Postgres
    if way != "pg_backends_killed":  # killed backends fail single steps; the others fail many in a row
        assert _most_failures_in_a_row(top[0], "flush", since) > 5  # the old dead-letter limit


async def test_redis_down_and_restarted_with_aof_loses_nothing_acknowledged(
    top: tuple[Topology, list[Target]],
) -> None:
    since = _log_size(top[0], "flush")
    outcome = await _scenario(top, "redis_restart_aof", seconds=10.0)  # 6 s down: past the backoff cap, the takeover
    assert outcome.ledger.acked < outcome.ledger.sent  # the edge answered 503 while Redis was away
    assert _most_failures_in_a_row(top[0], "flush", since) > 5


async def test_a_destination_down_then_back_gets_every_event(top: tuple[Topology, list[Target]]) -> None:
    await _scenario(top, "destination_down", seconds=0.8)  # 4 s down: past the lease (3 s), the cool-down (1 s)


async def test_poison_mixed_into_other_tenants_traffic(top: tuple[Topology, list[Target]]) -> None:
    outcome = await _scenario(top, "poison", seconds=4.0)  # 3 s of load, a fifth of it poison (~60 requests)
    assert outcome.ledger.sent > outcome.ledger.acked  # the truncated bodies were refused, not stored


async def test_a_poison_burst_beside_another_accounts_burst(top: tuple[Topology, list[Target]]) -> None:
    """The reported case: 400 concurrent requests to account A and 20 poison requests to account B at once
    (NUL in the path and in the body's type and id)."""
    topo, targets = top
    a, b = targets[0], targets[-1]
    load = Load([a], 1.0, run_id=uuid.uuid4().hex[:8], poison=[b])
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        stored_kinds = [n for n in range(40) if n % 5 < 3][:20]  # path, type/id and header poison: all stored
        sends = [load.send_poison(client, n) for n in stored_kinds]
        sends += [load.send(client, 5 * n + 1) for n in range(400)]
        await asyncio.gather(*sends)
    assert load.sent == 420
    assert len(load.acked) == 420
    ledger = await settle(topo, load, timeout_s=60)
    assert (ledger.lost, ledger.duplicated, ledger.delivered) == (0, 0, 420), ledger.line()


def test_redis_restarted_without_persistence_loses_only_the_window() -> None:
    """Without persistence, what Redis held (the stream not yet flushed, the consumer groups, the edge's
    endpoint configs) dies with it: lost events are at most those in the stream at that moment, and
    everything else rebuilds itself (groups recreated, configs resynced from Postgres by the sweep, which
    notices the loss within its check interval plus the backoff it reached during the outage)."""
    with topology(aof=False, **SETTINGS) as topo:
        targets = asyncio.run(provision(topo))
        loads: list[Load] = []
        outcome = asyncio.run(
            run_scenario(
                topo,
                targets,
                "redis_restart_no_aof",
                seconds=2,
                rate_per_s=RATE,
                calm_s=1.5,  # enough for the stream to hold entries when Redis dies
                after_s=5.0,  # past SERVED_AGAIN_S, so the load meets the rebuilt configs
                settle_s=60.0,
                loads=loads,
            )
        )
        back = topo.redis.started_at
    ledger, (load,) = outcome.ledger, loads
    assert ledger.lost <= outcome.window, outcome.line()
    assert ledger.duplicated == 0, outcome.line()
    assert ledger.delivered + outcome.window >= ledger.acked, outcome.line()
    # Served again soon: measured from Redis being back, not as a count of answers, which depends on how
    # fast a loaded machine lets the load send them.
    served_again_s = load.first_acked_after(back)
    assert served_again_s is not None, outcome.line()
    assert served_again_s <= SERVED_AGAIN_S, (served_again_s, outcome.line())
    # Never told that an endpoint does not exist (they all do): while Redis is away and while the configs are
    # rebuilt the edge answers 503 (retry), never 404, which some providers take as final.
    assert not [a for a in load.answers if a[2] == 404], outcome.line()
