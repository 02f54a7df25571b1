"""Delivery: deliveries/s to a local sink with one worker process, and ingest → first attempt latency.

Sink: ``bench.sink`` (answers 200 at once), in its own process; ``sink_cpu_us_per_delivery`` is its CPU per
delivery over the throughput rounds, the part of the two cores the receiver took (ADR 0047).

1. Throughput: one ``hookyard worker deliver`` process is started and idle; N tasks (400-byte JSON events,
   one destination) are committed in one transaction, which NOTIFYs the worker; the figure is N over the
   time from that commit until the last task is ``succeeded`` (every attempt recorded; both instants read from
   Postgres' clock, so the poll that notices the end adds nothing). Side by side in
   the same worker: rounds without and with a trivial transform (``TRIVIAL``, a header added, run in the
   worker's sandbox processes), each round a destination of its own, after one short round of each kind that
   is not counted (the sandbox processes start, the first isolate compiles). The rounds run in
   ``bench.rounds.ORDER``, plain and transformed balanced by position (ABBA BAAB, twice): this machine gives
   more CPU early, and the old order (plain first in every pair, the best round of each kind compared) let the
   plain kind take the early bursts. ``deliveries_per_s`` and ``transformed_per_s`` are the mean rate of each
   kind's rounds (``*_rounds_per_s`` each round's, in order; ``rates_ratio`` the one over the other);
   ``pair_ratios`` each adjacent pair's ratio (half of them plain first), and ``transformed_ratio`` their
   median (issue 42: at least 0.8): a burst of the machine's other load in one round moves one pair, not it.
   ``transform_us_per_delivery`` is the difference of the kinds' seconds per delivery at those mean rates
   (issue 28: at most 150 µs), and ``*_cpu_us_per_delivery`` the worker process's CPU time per delivery over
   those rounds (its threads included; ``transformed_cpu_us_per_delivery`` with its sandbox processes,
   ``transformed_worker_cpu_us_per_delivery`` the worker alone): the cost that does not depend on how busy
   the machine's other processes keep its cores. ``transformed_ratio`` is printed last.
   ``pg_cpu_us_per_delivery`` is the same for the Postgres backends serving that worker's connections
   (found by their client ports, CPU read from ``/proc/<pid>/stat``): Postgres runs on the same cores, and
   per delivery it spends about as much as the worker.
2. Latency: edge, a flush worker process and a deliver worker process; events are POSTed to the ingest URL at
   500/s (paced, not a burst) for the run; the figure is, per event, the first attempt's start
   (``deliveries.created_at``) minus the edge's ``received_at``: stream, flush, routing, commit, NOTIFY,
   claim, send. p50/p99 over all events; ``committed_*`` is the part until the flush committed the task
   (its ``created_at``, the transaction's start), the rest is NOTIFY, claim and the start of the send.
   The same again at 100 events/s (``at_100_*``): the pipeline's latency when the deliver worker is not
   near its capacity (on a small machine 500 deliveries/s may be).

``BENCH_DELIVERY_THROUGHPUT_ONLY=1`` runs the throughput rounds alone (no latency part, its figures left out;
``transformed_ratio`` still last): old and new alternated many times in one sitting, a minute each less.

Targets (``TARGETS``): ≥ 8,000 deliveries/s for one worker; ingest → first attempt p50 ≤ 25 ms, p99 ≤
250 ms; a trivial transform ≤ 150 µs per delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Coroutine
from typing import Any
from urllib.parse import urlsplit

import psutil

from bench import sink as bench_sink
from bench.infra import bench_env, free_port, granian, run_process, script, wait_listening
from bench.quiet import UNFINISHED
from bench.results import Target
from bench.rounds import ORDER, Round, summary
from bench.setup import create_endpoint
from control.db import connect
from control.db.flush import store_batch
from control.db.tasks import NOTIFY_CHANNEL
from control.records.storable import event_row
from shared import ids
from shared.wire import IngestRecord

__all__ = ("run",)

TARGETS = (
    Target(
        figure="delivery to a local sink, one worker",
        key="deliveries_per_s",
        bound=8_000,
        unit=" /s",
        beside=("worker_cpu_us_per_delivery", "pg_cpu_us_per_delivery", "sink_cpu_us_per_delivery"),
    ),
    Target(
        figure="ingest → first attempt at 500 events/s, p50",
        key="first_attempt_p50_ms",
        op="<=",
        bound=25,
        unit=" ms",
        beside=("committed_p50_ms",),
    ),
    Target(
        figure="ingest → first attempt at 500 events/s, p99",
        key="first_attempt_p99_ms",
        op="<=",
        bound=250,
        unit=" ms",
        beside=("committed_p99_ms",),
    ),
    Target(
        figure="deliveries/s with a trivial transform (through the sandbox pool) over without, same worker",
        key="transformed_ratio",
        bound=0.8,
        beside=("transformed_per_s", "deliveries_per_s"),
    ),
    Target(
        figure="a trivial transform's cost per delivery (same worker, alternated rounds)",
        key="transform_us_per_delivery",
        op="<=",
        bound=150,
        unit=" µs",
        beside=("transformed_per_s",),
    ),
)


RATE_PER_S = 500
LOW_RATE_PER_S = 100
TRIVIAL = "function handler(request) { request.headers['x-transformed'] = '1'; return request; }"
"""The trivial transform: compiled once, then one call per delivery, the body passed through unchanged."""
WARM_UP = 1_000
"""Deliveries of each kind before the counted rounds, not counted."""
"""Also measured: the pipeline's own latency, at a rate far from the deliver worker's capacity."""
_HEADERS = [
    (b"content-type", b"application/json; charset=utf-8"),
    (b"user-agent", b"Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
    (b"stripe-signature", b"t=1795252711,v1=" + b"a" * 64),
]


def _body(i: int) -> bytes:
    doc = {"id": f"evt_{i:024d}", "type": "payment_intent.succeeded", "data": {"object": {"amount": 2000 + i}}}
    return json.dumps(doc).encode().ljust(400)


def bench_records(endpoint_id: str, count: int) -> list[IngestRecord]:
    """``count`` captured requests of ``endpoint_id`` as the edge writes them, received now."""
    now = time.time()
    return [
        IngestRecord(
            id=ids.new_id("evt"),
            endpoint_id=endpoint_id,
            received_at_us=int(now * 1_000_000),
            method="POST",
            path="",
            query="",
            headers=_HEADERS,
            body=_body(i),
            source_ip="203.0.113.7",
        )
        for i in range(count)
    ]


async def route_to_sink(database_url: str, endpoint_id: str, url: str, transform: str | None = None) -> tuple[str, str]:
    """A destination and a forward-all rule on the endpoint (the rows the destinations API writes)."""
    conn = await connect(database_url)
    try:
        destination_id, rule_id = ids.new_id("dst"), ids.new_id("rule")
        await conn.execute(
            "INSERT INTO destinations (id, endpoint_id, name, url, transform) VALUES ($1, $2, 'sink', $3, $4)",
            destination_id,
            endpoint_id,
            url,
            transform,
        )
        await conn.execute(
            "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ($1, $2, 'all', $3)",
            rule_id,
            endpoint_id,
            {"op": "AND", "children": []},
        )
        await conn.execute(
            "INSERT INTO rule_destinations (rule_id, destination_id) VALUES ($1, $2)", rule_id, destination_id
        )
    finally:
        await conn.close()
    return destination_id, rule_id


_SUCCEEDED = """SELECT count(*) AS done, max(updated_at) AS last
                 FROM delivery_tasks WHERE destination_id = $1 AND status = 'succeeded'"""
"""The end of the run is when the last result was written (its transaction's time), not when a poll saw it: the
poll can be slow without adding its interval to the figure."""


async def _throughput(
    database_url: str, endpoint_id: str, sink: str, total: int, transform: str | None = None
) -> tuple[int, float]:
    destination_id, rule_id = await route_to_sink(database_url, endpoint_id, sink, transform)
    conn = await connect(database_url)
    try:
        records = bench_records(endpoint_id, total)
        tasks = [(ids.new_id("task"), r.id, rule_id, destination_id) for r in records]
        async with conn.transaction():  # as the flush stores them: the events and their tasks at once
            await store_batch(conn, [event_row(r) for r in records], tasks)
        committed = await conn.fetchval("SELECT clock_timestamp()")
        started = time.perf_counter()
        while True:  # the unfinished ones, through their partial index: the poll must not load the machine
            left = await conn.fetchval(UNFINISHED)
            if left == 0:
                row = await conn.fetchrow(_SUCCEEDED, destination_id)
                if row["done"] < total:
                    raise SystemExit(f"only {row['done']} of {total} deliveries succeeded")
                return row["done"], (row["last"] - committed).total_seconds()
            if time.perf_counter() - started > 300:
                raise SystemExit(f"{left} of {total} deliveries not finished in 300 s")
            await asyncio.sleep(0.25)
    finally:
        await conn.close()


async def _paced_load(host: str, port: int, path: str, count: int, rate: float, connections: int = 8) -> None:
    """``count`` POSTs at ``rate`` per second over kept-alive connections, written as raw HTTP/1.1: a Python HTTP
    client would cost as much CPU as the pipeline being measured on a small machine."""
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1

    async def lane(k: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for i in range(k, count, connections):
                await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
                body = _body(i)
                head = f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
                writer.write(f"{head}content-length: {len(body)}\r\n\r\n".encode() + body)
                status = (await reader.readline()).split(b" ", 2)[1]
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                if status != b"200":
                    raise SystemExit(f"edge answered {status.decode()}")
        finally:
            writer.close()

    await asyncio.gather(*(lane(k) for k in range(connections)))


async def _latency(
    database_url: str, endpoint_id: str, edge_port: int, token: str, sink: str, seconds: float, rate: float
) -> dict:
    await route_to_sink(database_url, endpoint_id, sink)
    count = int(rate * seconds)
    await _paced_load("127.0.0.1", edge_port, f"/h/{token}", count, rate)
    conn = await connect(database_url)
    try:
        deadline = time.monotonic() + 60
        while (
            await conn.fetchval("SELECT count(DISTINCT event_id) FROM deliveries WHERE endpoint_id = $1", endpoint_id)
            < count
        ):
            if time.monotonic() > deadline:
                raise SystemExit("not every event got a delivery attempt within 60 s")
            await asyncio.sleep(0.1)
        row = await conn.fetchrow(
            """WITH first AS (
                   SELECT d.event_id, min(d.created_at) AS at FROM deliveries d
                    WHERE d.endpoint_id = $1 GROUP BY d.event_id
               )
               SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
                      percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99, max(ms) AS max, count(*) AS n,
                      percentile_cont(0.5) WITHIN GROUP (ORDER BY flush_ms) AS flush_p50,
                      percentile_cont(0.99) WITHIN GROUP (ORDER BY flush_ms) AS flush_p99
                 FROM (SELECT extract(epoch FROM f.at - e.received_at) * 1000 AS ms,
                              extract(epoch FROM t.created_at - e.received_at) * 1000 AS flush_ms
                         FROM first f JOIN events e ON e.id = f.event_id AND e.endpoint_id = $1
                         JOIN delivery_tasks t ON t.event_id = e.id) x""",
            endpoint_id,
        )
    finally:
        await conn.close()
    return {k: round(row[k], 1) if k != "n" else row[k] for k in ("p50", "p99", "max", "n", "flush_p50", "flush_p99")}


def _backends(worker: psutil.Process, database_url: str) -> dict[int, psutil.Process]:
    """The Postgres backends serving the worker's connections, by their client ports (Postgres local)."""
    port = urlsplit(database_url).port or 5432
    ports = [c.laddr.port for c in worker.net_connections(kind="tcp") if c.raddr and c.raddr.port == port]

    async def pids() -> list[int]:
        conn = await connect(database_url)
        try:
            rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])", ports)
        finally:
            await conn.close()
        return [r["pid"] for r in rows]

    found = {}
    for pid in asyncio.run(pids()):
        with contextlib.suppress(psutil.Error):
            found[pid] = psutil.Process(pid)
    return found


def _cpu_s(processes: dict[int, psutil.Process]) -> dict[int, float]:
    seconds = {}
    for pid, process in processes.items():
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            seconds[pid] = times.user + times.system
    return seconds


def _cpu(pid: int, database_url: str, measured: Coroutine[Any, Any, tuple[int, float]], transformed: bool) -> Round:
    """The coroutine's figures, the CPU seconds the worker process and its sandbox processes spent
    meanwhile, and those of the Postgres backends serving it (a backend the worker's pool opened meanwhile
    counted from zero); None when no backend is found: over a Unix socket (the embedded Postgres) a backend
    has no client port to be matched by, and 0 would read as a measurement. Last, the worker process's own
    CPU seconds (its event loop is what a transformed delivery is bound by: ADR 0060)."""
    worker = psutil.Process(pid)
    before = _cpu_s(_family(worker))
    pg_before = _cpu_s(_backends(worker, database_url))
    count, elapsed = asyncio.run(measured)
    after = _cpu_s(_family(worker))
    pg_after = _cpu_s(_backends(worker, database_url))
    pg_s = sum(s - pg_before.get(p, 0.0) for p, s in pg_after.items()) if pg_after else None
    own_s = after.get(pid, 0.0) - before.get(pid, 0.0)
    cpu_s = sum(s - before.get(p, 0.0) for p, s in after.items())
    return Round(transformed=transformed, delivered=count, seconds=elapsed, cpu_s=cpu_s, pg_s=pg_s, own_s=own_s)


def _family(worker: psutil.Process) -> dict[int, psutil.Process]:
    """The worker and its sandbox processes (transforms run there: ``control.transform.pool``)."""
    found = {worker.pid: worker}
    with contextlib.suppress(psutil.Error):
        found.update({child.pid: child for child in worker.children(recursive=True)})
    return found


def _process_cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def run(seconds: float) -> dict[str, object]:
    hookyard = script("hookyard")
    total = int(max(5_000, min(100_000, seconds * 2_500)))  # per round, as many as before the rounds were 16
    with bench_env(egress="any") as bench:
        sink_port, edge_port = free_port(), free_port()
        sink = f"http://127.0.0.1:{sink_port}/hook"
        database_url = bench.settings.database_url or ""
        throughput_ep = asyncio.run(create_endpoint(bench.settings))
        latency_eps = [asyncio.run(create_endpoint(bench.settings)) for _ in range(2)]
        with run_process(bench_sink.command(sink_port), bench.env, sink) as sink_proc:
            begun = time.time()
            with run_process([hookyard, "worker", "deliver"], bench.env) as worker:
                wait_listening(database_url, NOTIFY_CHANNEL, since=begun)  # ready for the tasks, as Postgres says
                for transform in (None, TRIVIAL):  # not counted: the first claims, the sandbox's start
                    asyncio.run(_throughput(database_url, throughput_ep.id, sink, WARM_UP, transform))
                sink_before = _process_cpu_s(sink_proc.pid)
                rounds = [
                    _cpu(
                        worker.pid,
                        database_url,
                        _throughput(database_url, throughput_ep.id, sink, total, TRIVIAL if kind else None),
                        kind,
                    )
                    for kind in ORDER
                ]
            sink_s = _process_cpu_s(sink_proc.pid) - sink_before
            sent = sum(r.delivered for r in rounds)
            throughput_only = os.environ.get("BENCH_DELIVERY_THROUGHPUT_ONLY") == "1"
            edge = f"http://127.0.0.1:{edge_port}"
            latencies = []
            if not throughput_only:  # the latency part: its own processes
                begun = time.time()
                with (
                    run_process(granian("edge.app:create_app", edge_port), bench.env, f"{edge}/healthz"),
                    run_process([hookyard, "worker", "flush"], bench.env),
                    run_process([hookyard, "worker", "deliver"], bench.env),
                ):
                    wait_listening(database_url, NOTIFY_CHANNEL, since=begun)
                    for endpoint, rate in zip(latency_eps, (RATE_PER_S, LOW_RATE_PER_S), strict=True):
                        latencies.append(
                            asyncio.run(
                                _latency(
                                    database_url,
                                    endpoint.id,
                                    edge_port,
                                    endpoint.token,
                                    sink,
                                    max(2.0, seconds / 2),
                                    rate,
                                )
                            )
                        )
    figures = summary(rounds)
    ratio = figures.pop("transformed_ratio")
    figures["sink_cpu_us_per_delivery"] = round(sink_s / sent * 1e6, 1)
    if latencies:
        high, low = latencies
        figures |= _latency_figures(high, low)
    figures["transformed_ratio"] = ratio  # last: issue 42's figure
    return figures


def _latency_figures(high: dict, low: dict) -> dict[str, object]:
    return {
        "rate_per_s": RATE_PER_S,
        "events": high["n"],
        "first_attempt_p50_ms": high["p50"],
        "first_attempt_p99_ms": high["p99"],
        "first_attempt_max_ms": high["max"],
        "committed_p50_ms": high["flush_p50"],
        "committed_p99_ms": high["flush_p99"],
        f"at_{LOW_RATE_PER_S}_p50_ms": low["p50"],
        f"at_{LOW_RATE_PER_S}_p99_ms": low["p99"],
    }
