"""Flush throughput: events/s from a pre-filled ingest stream into Postgres, one worker process.

The stream is filled the way the edge fills it (entries of ~50 records, realistic headers and a 400-byte
JSON body, spread over 20 endpoints), then one flush worker (its lanes sharing one router, as
``hookyard worker flush`` runs them) drains it; the figure is events per second of wall time from the first
read to the last commit. Target (``TARGETS``): ≥ 20,000 events/s with routing included.

Three variants, each on a fresh database so none inherits the others' rows:

- ``forward_all`` (the headline ``events_per_s``): every endpoint has one active forward-all rule with one
  destination, so every event also creates one delivery task in its transaction.
- ``condition``: every endpoint's rule is ``body.type equals payment_intent.succeeded AND header
  content-type contains application/json`` (every event matches: its body is parsed and both leaves run).
- ``none``: no rules at all (the secondary ``norule_events_per_s``).

Schema learning runs in every variant, as ``hookyard up`` runs it: the flush notes its new events and a
learn worker in a process of its own (``control.workers.learn``, started before the drain and sharing the
host's cores with it) learns them meanwhile (ADR 0041). ``forward_all`` is drained without it too, in the
same run, with real payloads in the mix: one event in ``REAL_EVERY`` is one of the provider's published
examples (``bench.real``: 329 GitHub payloads over 58 event types, 1-28 KB, up to 561 paths), in turn,
attributed as the edge attributes them: ``PAIRS`` pairs of back-to-back drains (both databases filled
first), half of them learning first, and ``learn_ratio`` (printed last) is the geometric mean of the two
orders' median on/off ratios (the headline figures keep each one's best drain). Its target is 0.9 or
more. A drain with learning ends when the flush has committed its last batch; the
bench then waits until every noted event is learned: ``learn_lag_s`` is how long after the last commit
that took (median of the learning drains), ``learned_per_s`` the events learned per second from the
drain's start to then, and ``learner_cpu_us_per_event`` the learn process's CPU per event.

No deliver worker runs: the bench owns its database, and it checks afterwards that every event is stored and
that every routed variant holds exactly one pending, never-attempted task per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg

from bench.infra import Bench, bench_env
from bench.real import real_payloads
from bench.results import Target
from bench.setup import create_endpoint
from control.db import partitions
from control.db.context import Principal
from control.db.learn_queue import backlog
from control.records.destinations import DestinationCreate
from control.routing.route import Router
from control.schemas.learn import Learner
from control.service.destinations.crud import create_destination
from control.workers.flush import Flush
from control.workers.learn import Learn, lower_priority
from control.workers.loop import frozen_start
from control.workers.main import worker_context
from shared import ids
from shared.settings import Settings
from shared.wire import IngestRecord, encode_records

__all__ = ("run",)

TARGETS = (
    Target(
        figure="flush, stream → Postgres, a forward-all rule on every event",
        key="events_per_s",
        bound=20_000,
        unit=" events/s",
        beside=("norule_events_per_s", "cond_events_per_s", "lanes"),
    ),
    Target(
        figure="flush with schema learning on over off (1 event in 20 a real GitHub payload)",
        key="learn_ratio",
        bound=0.9,
        unit="×",
        beside=("learn_off_events_per_s", "learn_lag_s"),
    ),
)


ENDPOINTS = 20
EVENT_TYPE = "payment_intent.succeeded"
PAIRS = 4
"""Learning on/off pairs of drains behind ``learn_ratio``."""
REAL_EVERY = 20
"""In ``forward_all`` (and its learning-off twin), one event in this many is a real payload."""
REAL_HEADERS = [
    (b"host", b"hooks.example.com"),
    (b"user-agent", b"GitHub-Hookshot/a1b2c3d"),
    (b"content-type", b"application/json"),
    (b"x-hub-signature-256", b"sha256=" + b"b" * 64),
    (b"accept", b"*/*"),
]
SINK = "http://127.0.0.1:9/sink"  # the discard port: nothing would answer, and nothing is sent anyway
CONDITION = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": EVENT_TYPE},
        {"field": "header.content-type", "operator": "contains", "value": "application/json"},
    ],
}
HEADERS = [
    (b"host", b"hooks.example.com"),
    (b"user-agent", b"Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
    (b"content-type", b"application/json; charset=utf-8"),
    (b"stripe-signature", b"t=1795252711,v1=" + b"a" * 64),
    (b"accept", b"*/*; q=0.5, application/xml"),
    (b"content-length", b"400"),
]


def _body(i: int) -> bytes:
    doc = {
        "id": f"evt_{i:024d}",
        "object": "event",
        "type": EVENT_TYPE,
        "data": {"object": {"id": f"pi_{i:024d}", "amount": 2000 + i, "currency": "usd", "status": "succeeded"}},
        "livemode": False,
        "pending_webhooks": 1,
    }
    return json.dumps(doc).encode().ljust(400)


async def _add_rules(settings: Settings, endpoints: list[tuple[str, str]], variant: str) -> None:
    """One destination per endpoint with its rule, made through the service the API uses."""
    if variant == "none":
        return
    async with worker_context(settings) as ctx:
        for endpoint_id, account_id in endpoints:
            data = (
                DestinationCreate(url=SINK, forward_all=True)
                if variant == "forward_all"
                else DestinationCreate(url=SINK, condition_tree=CONDITION)
            )
            created = await create_destination(
                ctx, Principal(account_id=account_id, key_id="bench", kind="live"), endpoint_id, data
            )
            if created.rule is None or not created.rule.active:
                raise SystemExit(f"{variant}: no active rule was created for {endpoint_id}")


async def _fill(settings: Settings, endpoint_ids: list[str], total: int, real: bool = False) -> None:
    examples = real_payloads()
    async with worker_context(settings) as ctx:
        await Flush(ctx).ensure_groups()
        batch: list[IngestRecord] = []
        async with ctx.redis.pipeline(transaction=False) as pipe:
            for i in range(total):
                now = time.time()
                if real and i % REAL_EVERY == REAL_EVERY - 1:
                    event_type, body = examples[(i // REAL_EVERY) % len(examples)]
                    provider, headers = "code_host", [*REAL_HEADERS, (b"x-github-event", event_type.encode())]
                else:
                    event_type, body, provider, headers = EVENT_TYPE, _body(i), "payments", HEADERS
                batch.append(
                    IngestRecord(
                        id=ids.new_id("evt"),
                        endpoint_id=endpoint_ids[i % len(endpoint_ids)],
                        received_at_us=int(now * 1_000_000),
                        method="POST",
                        path="",
                        query="",
                        headers=headers,
                        body=body,
                        source_ip="203.0.113.7",
                        provider=provider,
                        event_type=event_type,
                        idempotency_key=f"evt_{i:024d}",
                        signature_valid=True,
                    )
                )
                if len(batch) == 50:
                    pipe.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(batch)})
                    batch = []
                if i % 5000 == 4999:
                    await pipe.execute()
            if batch:
                pipe.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(batch)})
            await pipe.execute()


async def _prefix_index(settings: Settings) -> None:
    """Today's ``q`` prefix index up to now, as the sweep keeps it most of the day: the flush's inserts
    meet its predicate (they lie past it, so they are not indexed)."""
    index_today = getattr(partitions, "index_today", None)  # absent in a before run
    if index_today is None:
        return
    conn = await asyncpg.connect(settings.database_url)
    try:
        await index_today(conn, upto=datetime.now(UTC))
    finally:
        await conn.close()


async def _drain(settings: Settings, lanes: int, learn: bool) -> tuple[int, float]:
    """Runs the worker's flush lanes (one process, one shared router and learner) until the stream is empty."""
    async with worker_context(settings) as ctx:
        router = Router(ctx)
        flushes = [Flush(ctx, consumer=f"bench-{i}", block_ms=50, router=router, learn=learn) for i in range(lanes)]

        async def lane(flush: Flush) -> int:
            total = 0
            while n := await flush.step():
                total += n
            return total

        try:
            with frozen_start():  # as ``hookyard worker`` runs its loops
                start = time.perf_counter()
                counts = await asyncio.gather(*(lane(f) for f in flushes))
                return sum(counts), time.perf_counter() - start
        finally:
            await router.aclose()


async def _check(settings: Settings, total: int, routed: bool) -> int:
    """Every event stored once; one pending, never-attempted task per event when routed (none otherwise)."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        events = await conn.fetchval("SELECT count(*) FROM events")
        tasks, untouched, distinct = await conn.fetchrow(
            """SELECT count(*), count(*) FILTER (WHERE status = 'pending' AND attempts = 0),
                      count(DISTINCT event_id) FROM delivery_tasks"""
        )
    finally:
        await conn.close()
    expected_tasks = total if routed else 0
    if events != total or tasks != expected_tasks or untouched != tasks or distinct != tasks:
        raise SystemExit(
            f"after the flush: {events} events (expected {total}), {tasks} tasks for {distinct} events "
            f"(expected {expected_tasks}), {untouched} pending and never attempted"
        )
    return tasks


async def _learned(settings: Settings) -> int:
    conn = await asyncpg.connect(settings.database_url)
    try:
        return await conn.fetchval("SELECT coalesce(sum(sample_count), 0) FROM schemas")
    finally:
        await conn.close()


@contextlib.contextmanager
def _prepared(variant: str, total: int) -> Iterator[Bench]:
    """A fresh database with the variant's endpoints and rules, and its stream filled with ``total`` events."""
    with bench_env(egress="any") as bench:  # its destinations are on loopback
        made = [asyncio.run(create_endpoint(bench.settings)) for _ in range(ENDPOINTS)]
        asyncio.run(_add_rules(bench.settings, [(e.id, e.account_id) for e in made], variant))
        asyncio.run(_prefix_index(bench.settings))
        asyncio.run(_fill(bench.settings, [e.id for e in made], total, real=variant == "forward_all"))
        yield bench


def _learner(settings: Settings, ready: Any, stop: Any, out: Any) -> None:
    """The learn worker's loop in a process of its own, as ``hookyard worker learn`` runs it, until ``stop``;
    puts (events learned, CPU seconds) in ``out``."""

    lower_priority()  # as ``control.workers.main.run`` does for a process of the learn loop alone

    async def main() -> None:
        async with worker_context(settings) as ctx:
            learn, learned = Learn(ctx, learner=Learner()), 0
            ready.set()
            cpu = time.process_time()
            with frozen_start():
                while not stop.is_set():
                    n = await learn.step()
                    learned += n
                    if not n:
                        await asyncio.sleep(learn.idle_s)
            out.put((learned, time.process_time() - cpu))

    asyncio.run(main())


async def _backlog_gone(settings: Settings) -> float:
    """Waits until the learn worker has taken every note; the time it did (perf_counter)."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        while (await backlog(conn))[0]:
            await asyncio.sleep(0.01)
        return time.perf_counter()
    finally:
        await conn.close()


LEARNING: list[tuple[float, float, float]] = []
"""Per drain with learning: (lag after the last commit in s, events learned per s, learner CPU µs per event)."""


def _drained(bench: Bench, variant: str, total: int, learn: bool) -> tuple[float, int, int, int]:
    """(seconds, events, tasks, lanes) of draining a prepared database, checked afterwards; with ``learn``,
    a learn worker process runs alongside, and what it took to learn everything goes to ``LEARNING``."""
    process = None
    if learn:
        spawn = multiprocessing.get_context("spawn")
        ready, stop, out = spawn.Event(), spawn.Event(), spawn.Queue()
        process = spawn.Process(target=_learner, args=(bench.settings, ready, stop, out), daemon=True)
        process.start()
        if not ready.wait(60):
            raise SystemExit("the learn worker did not start")
    try:
        started = time.perf_counter()
        flushed, elapsed = asyncio.run(_drain(bench.settings, bench.settings.flush_lanes, learn))
        if process is not None:
            done = asyncio.run(_backlog_gone(bench.settings))
            stop.set()
            learned, cpu = out.get(timeout=60)
            LEARNING.append((done - started - elapsed, total / (done - started), cpu / max(learned, 1) * 1e6))
    finally:
        if process is not None:
            stop.set()
            process.join(30)
    if flushed != total:
        raise SystemExit(f"{variant}: flushed {flushed} of {total} events")
    learned = asyncio.run(_learned(bench.settings))
    if learned != (total if learn else 0):
        raise SystemExit(f"{variant}: {learned} events learned, expected {total if learn else 0}")
    tasks = asyncio.run(_check(bench.settings, total, routed=variant != "none"))
    return elapsed, flushed, tasks, bench.settings.flush_lanes


def _variant(variant: str, total: int, learn: bool = True) -> tuple[float, int, int, int]:
    """(seconds, events, tasks, lanes) of one drain on a fresh database."""
    with _prepared(variant, total) as bench:
        return _drained(bench, variant, total, learn)


async def _checkpoint(settings: Settings) -> None:
    """Writes out what earlier drains left dirty, so each drain starts from the same clean server."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        await conn.execute("CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        pass  # not a superuser: the alternated order still cancels what the drain before leaves
    finally:
        await conn.close()


def _pair(total: int, learn_first: bool) -> dict[bool, tuple[float, int, int, int]]:
    """forward_all drained with learning on and off, back to back: both databases are prepared first, so the
    two drains lie seconds apart and meet the same neighbours. The first database is dropped and the server
    checkpointed before the second drain, which would otherwise pay for the first one's writes."""
    drains = {}
    with _prepared("forward_all", total) as second:
        with _prepared("forward_all", total) as first:
            asyncio.run(_checkpoint(first.settings))
            drains[learn_first] = _drained(first, "forward_all", total, learn_first)
        asyncio.run(_checkpoint(second.settings))
        drains[not learn_first] = _drained(second, "forward_all", total, not learn_first)
    return drains


def run(seconds: float) -> dict[str, object]:
    total = int(max(20_000, min(400_000, seconds * 20_000)))
    figures: dict[str, tuple[float, int, int, int]] = {}
    # Learning on and off are drained in PAIRS back-to-back pairs, half of them learning first. Whichever
    # drains second in a pair measured up to 20% slower (checkpoints and autovacuum of the first), so
    # learn_ratio is the geometric mean of the two orders' median ratios: the order's effect cancels.
    by_order: dict[bool, list[float]] = {True: [], False: []}
    for pair in range(PAIRS):
        learn_first = pair % 2 == 0
        drains = _pair(total, learn_first)
        for learn, figure in drains.items():
            variant = "forward_all" if learn else "learn_off"
            if variant not in figures or figure[0] < figures[variant][0]:
                figures[variant] = figure
            elapsed, flushed, tasks, _ = figure
            print(f"flush {variant}: {flushed} events, {tasks} tasks in {elapsed:.2f} s", flush=True)
        by_order[learn_first].append(drains[False][0] / drains[True][0])  # same events: the ratio of events/s
        print(
            f"flush learn_ratio of pair {pair + 1} (learning {'first' if learn_first else 'second'}): "
            f"{by_order[learn_first][-1]:.3f}",
            flush=True,
        )
    learn_ratio = math.sqrt(statistics.median(by_order[True]) * statistics.median(by_order[False]))
    lags, rates, cpus = zip(*LEARNING[-PAIRS:], strict=True)  # the pairs' drains with learning
    for variant in ("condition", "none"):
        figures[variant] = figure = _variant(variant, total)
        elapsed, flushed, tasks, _ = figure
        print(f"flush {variant}: {flushed} events, {tasks} tasks in {elapsed:.2f} s", flush=True)
    routed, cond, none = figures["forward_all"], figures["condition"], figures["none"]
    off = figures["learn_off"]
    return {
        "events": total,
        "seconds": round(routed[0], 2),
        "lanes": routed[3],
        "events_per_s": round(routed[1] / routed[0]),
        "tasks_per_s": round(routed[2] / routed[0]),
        "cond_events_per_s": round(cond[1] / cond[0]),
        "cond_tasks_per_s": round(cond[2] / cond[0]),
        "norule_events_per_s": round(none[1] / none[0]),
        "learn_off_events_per_s": round(off[1] / off[0]),
        "learn_lag_s": round(statistics.median(lags), 2),
        "learn_lag_max_s": round(max(lags), 2),
        "learned_per_s": round(statistics.median(rates)),
        "learner_cpu_us_per_event": round(statistics.median(cpus), 1),
        "learn_ratio": round(learn_ratio, 3),
    }
