"""``python -m bench faults``: the ledger under faults, one line per scenario, the verdict last.

The production topology (``bench.chaos``: separate edge, control, flush, deliver and sweep processes on
private Postgres and Redis, a sink destination per endpoint) under a steady signed load; during each
scenario one thing fails, then the load goes on and everything is allowed to settle:

=====================  ==================================================================================
edge_killed            SIGKILL of the edge mid-load, restarted
flush_killed           SIGKILL of the flush worker mid-batch, restarted (its entries are taken over)
deliver_killed         SIGKILL of the deliver worker mid-request, restarted (its leases expire)
pg_refused             Postgres refuses connections (``ALLOW_CONNECTIONS false``, backends terminated)
pg_backends_killed     every backend of the database terminated every 250 ms
pg_restart             the Postgres server stopped, then started again
redis_restart_aof      Redis SIGKILLed, down for a while, restarted on its AOF (``appendfsync everysec``)
redis_restart_no_aof   the same without persistence: the stream, its groups and the edge config are gone
destination_down       the destination refuses connections, then comes back
poison                 NUL in path, query, type and id, non-UTF-8 headers, truncated bodies, mixed into
                       another tenant's traffic (no other fault)
=====================  ==================================================================================

Targets: lost = 0 and duplicated = 0 in every scenario (for ``redis_restart_no_aof``: lost at most the
entries that were in the stream when Redis died, ``window``, the documented cost of running Redis without
persistence), every acknowledged event delivered; ``extra`` deliveries are the at-least-once resends of
sends whose outcome was not recorded (a killed deliver worker's requests in flight).
The summary's ``lost`` counts what a scenario lost beyond its window; ``lost_in_window`` the window's share.

``--seconds`` scales the outages (``python -m bench faults --seconds 60``: Postgres away 60 s, Redis 36 s,
the destination 5 minutes; the CLI's default of 10 makes a quick pass). Environment:
``FAULTS_RATE`` (webhooks/s, default 250), ``FAULTS_ONLY`` (comma-separated scenario names).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis.asyncio as aioredis

from bench import results
from bench.chaos import Load, Target, Topology, provision, topology
from bench.ledger import Ledger, settle
from shared.keys import Keys
from shared.wire import decode_records

__all__ = ("SCENARIOS", "Outcome", "run", "run_scenario")

TARGETS = (
    results.Target(
        figure="every fault scenario: acknowledged events lost",
        key="lost",
        op="==",
        bound=0,
        beside=("scenarios", "failed", "lost_in_window"),
    ),
    results.Target(
        figure="every fault scenario: events stored twice",
        key="duplicated",
        op="==",
        bound=0,
        beside=("extra_deliveries",),
    ),
)


Fault = Callable[[Topology, float], Awaitable[int]]
"""Injects the fault for ``seconds`` (and undoes it); returns the loss window it allows (0: none)."""


async def _restart(top: Topology, name: str, *, after_s: float = 1.0) -> int:
    top.kill(name, signal.SIGKILL)
    await asyncio.sleep(after_s)
    await asyncio.to_thread(top.start, name)
    return 0


async def _pg_refused(top: Topology, seconds: float) -> int:
    await top.admin("ALTER DATABASE hookyard ALLOW_CONNECTIONS false")
    try:
        await _terminate(top)
        await asyncio.sleep(seconds)
    finally:
        await top.admin("ALTER DATABASE hookyard ALLOW_CONNECTIONS true")
    return 0


async def _terminate(top: Topology) -> None:
    await top.admin(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = 'hookyard' AND pid <> pg_backend_pid()"
    )


async def _pg_backends_killed(top: Topology, seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await _terminate(top)
        await asyncio.sleep(0.25)
    return 0


async def _pg_restart(top: Topology, seconds: float) -> int:
    await asyncio.to_thread(top.servers.stop_postgres)
    await asyncio.sleep(seconds)
    await asyncio.to_thread(top.servers.start_postgres)
    return 0


async def _redis_restart(top: Topology, seconds: float) -> int:
    client = aioredis.Redis.from_url(top.redis.url)
    try:  # the records Redis holds and the flush has not stored yet: what dies with it without persistence
        if not top.redis.aof:
            # Writes held until the kill (which fails them: never acknowledged), so none lands between the
            # count and the kill: counted after the last one acknowledged, the window is exact.
            await client.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        entries = await client.xrange(Keys("hy:").ingest_stream(0))
        window = sum(len(decode_records(fields[b"r"])) for _, fields in entries)
    finally:
        await client.aclose()
    await asyncio.to_thread(top.redis.kill)
    await asyncio.sleep(seconds)  # down: the edge answers 503, the workers back off
    await asyncio.to_thread(top.redis.start)
    return 0 if top.redis.aof else window


async def _destination_down(top: Topology, seconds: float) -> int:
    top.kill("sink", signal.SIGKILL)
    await asyncio.sleep(seconds)
    await asyncio.to_thread(top.start, "sink")
    return 0


async def _nothing(top: Topology, seconds: float) -> int:
    await asyncio.sleep(seconds)
    return 0


SCENARIOS: dict[str, tuple[Fault, float]] = {
    # name: (fault, outage length as a multiple of --seconds)
    "edge_killed": (lambda top, s: _restart(top, "edge"), 0),
    "flush_killed": (lambda top, s: _restart(top, "flush"), 0),
    "deliver_killed": (lambda top, s: _restart(top, "deliver"), 0),
    "pg_refused": (_pg_refused, 1),
    "pg_backends_killed": (_pg_backends_killed, 1),
    "pg_restart": (_pg_restart, 1),
    "redis_restart_aof": (_redis_restart, 0.6),
    "redis_restart_no_aof": (_redis_restart, 0.6),
    "destination_down": (_destination_down, 5),
    "poison": (_nothing, 0.25),
}


@dataclass(frozen=True)
class Outcome:
    scenario: str
    ledger: Ledger
    window: int
    """Lost events the scenario allows (Redis without persistence); 0 for every other."""

    @property
    def ok(self) -> bool:
        ledger = self.ledger
        return ledger.lost <= self.window and ledger.duplicated == 0 and ledger.delivered + self.window >= ledger.acked

    def line(self) -> str:
        window = f" window={self.window}" if self.window else ""
        return f"{self.scenario}: {self.ledger.line()}{window} {'ok' if self.ok else 'FAILED'}"


async def run_scenario(
    top: Topology,
    targets: list[Target],
    name: str,
    *,
    seconds: float,
    rate_per_s: float,
    calm_s: float,
    settle_s: float,
    loads: list[Load] | None = None,
    after_s: float | None = None,
) -> Outcome:
    """Load for ``calm_s``, the fault (its outage scaled by ``seconds``), load for ``after_s`` more (default
    ``calm_s``), then the ledger once everything settled (at most ``settle_s``); the load is appended to
    ``loads`` if given."""
    fault, scale = SCENARIOS[name]
    half = len(targets) // 2
    poison = targets[half:] if name == "poison" else None
    load = Load(targets[:half] if poison else targets, rate_per_s, run_id=uuid.uuid4().hex[:8], poison=poison)
    if loads is not None:
        loads.append(load)
    sending = asyncio.create_task(load.run())
    try:
        await asyncio.sleep(calm_s)
        window = await fault(top, seconds * scale)
        await asyncio.sleep(calm_s if after_s is None else after_s)
    finally:
        load.stop()
        await sending
    return Outcome(name, await settle(top, load, timeout_s=settle_s), window)


def run(seconds: float) -> dict[str, object]:
    rate = float(os.environ.get("FAULTS_RATE", "250"))
    only = [n for n in os.environ.get("FAULTS_ONLY", "").split(",") if n] or list(SCENARIOS)
    outcomes: list[Outcome] = []
    for aof in (True, False):
        names = [n for n in only if (n == "redis_restart_no_aof") != aof]
        if not names:
            continue
        with topology(aof=aof) as top:
            targets = asyncio.run(provision(top))
            for name in names:
                # A destination back after minutes of failed probes may have tasks on the retry schedule's
                # 10-minute step: those are delivered then, so its ledger waits longer.
                settle_s = 900 if name == "destination_down" else max(180, seconds * 3)
                outcome = asyncio.run(
                    run_scenario(top, targets, name, seconds=seconds, rate_per_s=rate, calm_s=10, settle_s=settle_s)
                )
                print(outcome.line(), flush=True)
                outcomes.append(outcome)
    return {
        "scenarios": len(outcomes),
        # beyond each scenario's allowed window: what Redis without persistence drops is its documented cost
        "lost": sum(max(0, o.ledger.lost - o.window) for o in outcomes),
        "lost_in_window": sum(min(o.ledger.lost, o.window) for o in outcomes),
        "duplicated": sum(o.ledger.duplicated for o in outcomes),
        "extra_deliveries": sum(o.ledger.extra for o in outcomes),
        "failed": ",".join(o.scenario for o in outcomes if not o.ok) or "none",
    }
