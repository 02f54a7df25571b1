"""Pipeline: the whole service as ``hookyard up`` runs it, ingest to delivery, and how fast it drains.

Why a bench of its own (issue 27, section 1): the parts are an order of magnitude faster than the whole.
``bench delivery`` measures one deliver worker alone, ``bench edge`` the ingest alone; here they share the
machine as they do in use. ``hookyard up`` (edge, control and one ``hookyard worker`` with every loop, on
the bench's own database and Redis prefix, its defaults otherwise: activity log lines included) forwards
everything an endpoint receives to a local sink (``bench.sink``: one line per request with its
``x-hookyard-event-id``), while ``wrk -c32`` posts a 400-byte JSON event to the ingest URL for
``PIPELINE_S`` seconds (15, or ``--seconds`` when longer; the environment's ``PIPELINE_S`` for a quick
try). Then it waits until every stored event reached the sink.

Figures (the last line):

- ``delivered_per_s``: distinct events the sink received over the whole span, from wrk's start to the
  sink's last write (the file's mtime): the rate the service sustains, drain included, not a peak;
- ``ingest_rps``, ``acked`` (wrk's completed requests less errors), ``errors`` (no 2xx), ``refused`` (of
  those, answered with another status: the edge sheds load with a 503 once 20,000 entries wait for the
  flush, ``HOOKYARD_STREAM_HIGH_WATER``), ``stored`` (the endpoint's events:
  acked plus at most the requests in flight when wrk stopped, whose answers it never read), ``delivered``
  (distinct at the sink), ``extra`` (sink lines beyond one per event), ``drain_s`` (last delivery after
  wrk's end);
- ``cpu_us_*``: CPU (user + system) per delivered event from wrk's start to the drain's end, by process:
  ``worker`` (flush, deliver and the other loops), ``edge``, ``control``, ``learn``, ``sink``, ``pg`` (every
  Postgres process: the bench's server), ``redis``; ``total`` sums them. On two cores, ``delivered_per_s``
  can reach at most 2,000,000 / ``cpu_us_total``: this is where a delivery's budget goes.
- ``ledger``: ``exact`` when every stored event was delivered exactly once, nothing acknowledged is missing
  and every request without a 2xx was the edge's load-shedding 503 (nothing acknowledged, the sender
  retries; ``refused`` says how many): wrk counts every non-2xx alike, so the edge's own counter by outcome
  says how many were anything else (``edge_errors``, 0 in an exact ledger); ``inexact`` otherwise;
- ``edge_us_per_ingested``: the edge's CPU per acknowledged event; ``cost_ratio``: Postgres' and the worker's
  CPU per delivered event over it (issue 48: at most 2.5, what it costs to take a webhook out against what it
  costs to take it in); ``delivered_over_ingested``: ``delivered_per_s`` over ``ingest_rps`` (at least 0.6).
  Only the bench's own Postgres and Redis servers are counted (by their process ids), not others on the
  machine;
- ``tasks_*``, ``records_*``, ``events_*``: what a delivered event writes (``bench.table_writes``): rows
  inserted (``_ins``), updated (``_upd``, of which HOT ``_hot``) and deleted (``_del``) per delivered event in
  ``delivery_tasks``, ``deliveries`` and ``events``, counted over the whole run.

With ``PIPELINE_DESTINATIONS=1,10,100`` it first runs once per number of destinations per event (each a
forward-all rule to the sink; the ledger wants every event exactly that many times; wrk paced to offer about
2,000 requests a second to the sink at every fan-out) and adds each run's CPU per delivered request
(``cpu_us_per_request``: every process; ``pg_worker_us_per_request``): how the cost grows with the work, a
curve rather than a point. ``PIPELINE_ENDPOINTS=10000`` adds a run with that many endpoints, a destination
each, wrk posting to one of them at random per request, paced the same.

With ``PIPELINE_AGAINST=DIR`` (another checkout with its own ``.venv``, e.g. ``git worktree add DIR main``)
the run is ``PIPELINE_PAIRS`` pairs (default 2) of that checkout's code and this tree's, alternated in one
sitting, each on a database migrated by its own code; the line ends with each pair's cost ratios (old/new)
and the means of both figures, old beside new.

Targets (``TARGETS``): ``delivered_per_s`` ≥ 6,000 with the ledger exact.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import msgspec
import psutil
import redis.asyncio as redis_client

from bench import sink as bench_sink
from bench.delivery import _body, route_to_sink
from bench.infra import Bench, bench_env, free_port, run_process, script, wait_listening
from bench.quiet import wait_quiet
from bench.results import Target
from bench.setup import create_endpoint, create_endpoints_to_sink
from bench.table_writes import per_event, snapshot
from bench.wrk import run_wrk
from control.db import connect
from control.db.tasks import NOTIFY_CHANNEL
from shared.keys import Keys

__all__ = ("run",)

TARGETS = (
    Target(
        figure="the whole service (`hookyard up` + sink + wrk -c32), delivered/s over the whole span",
        key="delivered_per_s",
        bound=6_000,
        unit=" /s",
        beside=("ingest_rps", "acked", "delivered", "drain_s", "cpu_us_total"),
    ),
    Target(
        figure="the same run's ledger: every acknowledged event delivered once", key="ledger", op="==", bound="exact"
    ),
    Target(
        figure="Postgres + worker CPU per delivered event over the edge's per ingested event (issue 48)",
        key="cost_ratio",
        op="<=",
        bound=2.5,
        beside=("cpu_us_pg", "cpu_us_worker", "edge_us_per_ingested"),
    ),
    *(
        Target(
            figure=f"CPU per delivered request, {n} destination{'s' * (n > 1)} per event (issue 48's curve)",
            key=f"d{n}_cpu_us_per_request",
            unit=" µs",
            beside=(f"d{n}_pg_worker_us_per_request", f"d{n}_requests_per_s", f"d{n}_ledger"),
        )
        for n in (1, 10, 100)
    ),
    Target(
        figure="CPU per delivered request, 10,000 endpoints with a destination each (issue 48's curve)",
        key="e10000_cpu_us_per_request",
        unit=" µs",
        beside=("e10000_pg_worker_us_per_request", "e10000_requests_per_s", "e10000_ledger"),
    ),
    Target(
        figure="delivered/s over ingested/s in the same run (issue 48)",
        key="delivered_over_ingested",
        bound=0.6,
        beside=("delivered_per_s", "ingest_rps"),
    ),
)


PIPELINE_S = 15
"""wrk's duration: long enough that the drain after it is part of the figure, as it is in use."""
CONNECTIONS = 32
DRAIN_TIMEOUT_S = 600
CURVE_REQUESTS_PER_S = 2_000
"""What the curve's runs offer the sink, events a second times destinations per event: the same work at every
fan-out, well below what the box delivers, so each run drains in about its own length."""
UP_TIMEOUT_S = 120
"""How long ``hookyard up`` may take to answer on the edge: its embedded servers, migrations and workers start
on a machine the bench shares; 20 s was not always enough there."""


async def _stored(database_url: str, endpoint_id: str | None) -> int:
    """The endpoint's events (None: every endpoint's), counted row by row: the ledger's figure."""
    conn = await connect(database_url)
    try:
        if endpoint_id is None:
            return await conn.fetchval("SELECT count(*) FROM events")
        return await conn.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", endpoint_id)
    finally:
        await conn.close()


def _answered_in_error(edge: str) -> int:
    """Requests the edge answered with an error other than shedding load (``backpressure``), from its own
    ``hookyard_edge_requests_total`` by outcome (``/metrics``): the one way to tell a 503 of a full stream from
    a 500, which wrk counts alike."""
    with urllib.request.urlopen(f"{edge}/metrics", timeout=10) as resp:  # noqa: S310 - the bench's own edge
        text = resp.read().decode()
    failed = 0.0
    for line in text.splitlines():
        if line.startswith("hookyard_edge_requests_total{"):
            labels, _, value = line.rpartition(" ")
            if 'outcome="accepted"' not in labels and 'outcome="backpressure"' not in labels:
                failed += float(value)
    return int(failed)


def _drained(bench: Bench, endpoint_id: str | None, sink_file: Path) -> tuple[int, Counter[str]]:
    """Waits until nothing more can reach Postgres or the sink (``bench.quiet``: every ingest stream entry
    stored, no delivery task unfinished), or the timeout; then the stored events, counted once, and the sink's
    lines. It waited for its looks to hold still for a second instead, each look a second after the last."""
    settings = bench.settings
    keys = Keys(settings.redis_prefix, settings.stream_shards)
    asyncio.run(wait_quiet(settings.database_url or "", settings.redis_url or "", keys, timeout_s=DRAIN_TIMEOUT_S))
    seen = (
        Counter(line.decode() for line in sink_file.read_bytes().split(b"\n") if line)
        if sink_file.exists()
        else Counter()
    )
    return asyncio.run(_stored(settings.database_url or "", endpoint_id)), seen


class _Servers(msgspec.Struct, kw_only=True, frozen=True):
    """The process ids of the bench's own Postgres server (its postmaster) and Redis server: only theirs count
    as ``pg`` and ``redis``. Counting every process named ``postgres`` took in the servers of whatever else ran
    on the machine (another checkout's tests, the system's server), a noise as large as the figure."""

    postmaster: int
    redis: int


async def _servers(database_url: str, redis_url: str) -> _Servers:
    conn = await connect(database_url)
    try:
        postmaster = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid()  # while it lives
    finally:
        await conn.close()
    client = redis_client.Redis.from_url(redis_url)
    try:
        info = await client.info("server")
    finally:
        await client.aclose()
    return _Servers(postmaster=postmaster, redis=int(info["process_id"]))


def _role(proc: psutil.Process, up: int, sink: int, servers: _Servers) -> str | None:
    """Which part of the pipeline a process is, None for the rest of the machine."""
    try:
        if servers.postmaster in (proc.pid, proc.ppid()):
            return "pg"
        if proc.pid == servers.redis:
            return "redis"
        tree = {proc.pid, *(p.pid for p in proc.parents())}
        if sink in tree:
            return "sink"
        if up in tree and proc.pid != up:
            for own in (proc, *proc.parents()):  # granian's worker processes count as their server's
                args = own.cmdline()
                if "edge.app:create_app" in args or "control.app:create_app" in args:  # granian, exec'd
                    return "edge" if "edge.app:create_app" in args else "control"
                if "control.cli" in args:
                    command = args[args.index("control.cli") + 1 :]
                    return "learn" if command[:2] == ["worker", "learn"] else command[0]
            return "up"
    except (psutil.Error, ValueError, IndexError):
        return None
    return None


def _cpu(up: subprocess.Popen, sink: subprocess.Popen, servers: _Servers) -> Counter[str]:
    """Seconds of CPU (user + system) so far, by role; processes gone since are not counted."""
    spent: Counter[str] = Counter()
    for proc in psutil.process_iter():
        if (role := _role(proc, up.pid, sink.pid, servers)) is not None:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            spent[role] += times.user + times.system
    return spent


def _once(
    span_s: int, python: str | None = None, fanout: int = 1, delay_ms: int | None = None, endpoints: int = 1
) -> dict[str, object]:
    """One run of the pipeline: this tree's code, or (``python``) another checkout's, its migrations included;
    every event goes to ``fanout`` destinations (each its own forward-all rule, all on the sink); with
    ``endpoints`` > 1, that many endpoints each with its destination, wrk posting to one at random per request."""
    hookyard = script("hookyard") if python is None else str(Path(python).parent / "hookyard")
    checkout = None if python is None else Path(python).parents[2]  # its workers and edge import its code
    with (
        bench_env(python=python, egress="any") as bench,
        tempfile.TemporaryDirectory(prefix="hy-pipeline-") as data_dir,
    ):
        database_url = bench.settings.database_url or ""
        edge_port, control_port, sink_port = free_port(), free_port(), free_port()
        sink_file = Path(data_dir) / "sink.txt"
        paths, endpoint_id = None, None
        if endpoints > 1:
            many = asyncio.run(create_endpoints_to_sink(bench.settings, endpoints, f"http://127.0.0.1:{sink_port}/h"))
            endpoint, paths = many[0], [f"/h/{e.token}" for e in many]
        else:
            endpoint = asyncio.run(create_endpoint(bench.settings))
            endpoint_id = endpoint.id
            for n in range(fanout):  # a forward-all rule per destination: ``fanout`` tasks per event
                asyncio.run(route_to_sink(database_url, endpoint.id, f"http://127.0.0.1:{sink_port}/hook?d={n}"))
        up = [hookyard, "up", "--data-dir", str(Path(data_dir) / "hy")]
        up += ["--edge-port", str(edge_port), "--control-port", str(control_port)]
        edge = f"http://127.0.0.1:{edge_port}"
        begun = time.time()
        with (
            run_process(bench_sink.command(sink_port, sink_file), bench.env) as sink,
            run_process(up, bench.env, f"{edge}/healthz", health_timeout_s=UP_TIMEOUT_S, cwd=checkout) as service,
        ):
            wait_listening(database_url, NOTIFY_CHANNEL, since=begun)  # the deliver worker ready, as Postgres says
            servers = asyncio.run(_servers(database_url, bench.settings.redis_url or ""))
            writes_before = asyncio.run(snapshot(database_url))
            cpu_before = _cpu(service, sink, servers)
            started = time.time()
            result = run_wrk(
                f"{edge}/h/{endpoint.token}",
                seconds=span_s,
                connections=CONNECTIONS,
                body=_body(0),
                headers={"content-type": "application/json"},
                delay_ms=delay_ms,
                paths=paths,
            )
            ended = time.time()
            stored, seen = _drained(bench, endpoint_id, sink_file)
            failed = _answered_in_error(edge)
            cpu = _cpu(service, sink, servers)
            cpu.subtract(cpu_before)
            last_delivery = os.stat(sink_file).st_mtime if sink_file.exists() else ended
        writes = per_event(writes_before, asyncio.run(snapshot(database_url)), len(seen))  # the service stopped
    acked = result.requests - result.errors
    delivered = len(seen)
    requests = sum(seen.values())
    extra = sum(n - fanout for n in seen.values() if n > fanout)
    once_each = all(n == fanout for n in seen.values())
    only_shed = result.errors == result.refused and failed == 0  # no socket error, no answer but a shedding 503
    exact = delivered == stored and once_each and acked <= stored <= acked + CONNECTIONS and only_shed
    return {
        "seconds": span_s,
        "connections": CONNECTIONS,
        "destinations": fanout,
        "ingest_rps": round(result.rps),
        "acked": acked,
        "errors": result.errors,
        "refused": result.refused,
        "edge_errors": failed,
        "stored": stored,
        "delivered": delivered,
        "extra": extra,
        "drain_s": round(max(0.0, last_delivery - ended), 1),
        **{f"cpu_us_{role}": round(cpu[role] * 1e6 / max(delivered, 1)) for role in sorted(cpu)},
        "cpu_us_total": round(sum(cpu.values()) * 1e6 / max(delivered, 1)),
        "requests": requests,
        "cpu_us_per_request": round(sum(cpu.values()) * 1e6 / max(requests, 1)),
        "pg_worker_us_per_request": round((cpu["pg"] + cpu["worker"]) * 1e6 / max(requests, 1)),
        "delivered_per_s": round(delivered / max(last_delivery - started, 1e-9)),
        "ledger": "exact" if exact else "inexact",
        **writes,
        **_cost(cpu, delivered=delivered, acked=acked),
    }


def _cost(cpu: Counter[str], *, delivered: int, acked: int) -> dict[str, float]:
    """Issue 48's figure: Postgres' and the worker's CPU per delivered event over the edge's per ingested
    (acknowledged) event (target ≤ 2.5), the edge's own figure beside it."""
    edge_us = cpu["edge"] * 1e6 / max(acked, 1)
    delivery_us = (cpu["pg"] + cpu["worker"]) * 1e6 / max(delivered, 1)
    return {"edge_us_per_ingested": round(edge_us), "cost_ratio": round(delivery_us / max(edge_us, 1e-9), 2)}


def run(seconds: float) -> dict[str, object]:
    """One run, or with ``PIPELINE_AGAINST`` (another checkout with its ``.venv``, e.g. the code before a
    change) ``PIPELINE_PAIRS`` pairs (default 2), that checkout's run then this tree's, alternated in one
    sitting: the figures of this tree's last run, each pair's cost ratio and delivered/s over ingested/s, and
    last the means of both, old beside new."""
    span_s = int(os.environ.get("PIPELINE_S", max(PIPELINE_S, round(seconds))))
    fanouts = [int(n) for n in os.environ.get("PIPELINE_DESTINATIONS", "").split(",") if n]
    endpoints = [int(n) for n in os.environ.get("PIPELINE_ENDPOINTS", "").split(",") if n]
    sitting = _sitting(span_s)
    curve = _curve(span_s, fanouts, endpoints) if fanouts or endpoints else {}
    return {**curve, **sitting}  # the sitting's ratios last


def _sitting(span_s: int) -> dict[str, object]:
    against = os.environ.get("PIPELINE_AGAINST")
    if not against:
        figures = _once(span_s)
        ratios = _ratios(figures)
        return {**figures, "delivered_over_ingested": ratios["delivered_over_ingested"]}
    python = str(Path(against).resolve() / ".venv" / "bin" / "python")
    old: list[dict[str, float]] = []
    new: list[dict[str, float]] = []
    figures: dict[str, object] = {}
    for _ in range(int(os.environ.get("PIPELINE_PAIRS", "2"))):
        before = _once(span_s, python)
        old.append(_ratios(before))
        figures = _once(span_s)
        new.append(_ratios(figures))
        for side, run in (("old", before), ("new", figures)):  # each run's own figures, not only the means
            print(f"pipeline {side}: " + " ".join(f"{k}={v}" for k, v in run.items()), file=sys.stderr, flush=True)
    pairs = {f"pair{i}": f"{o['cost_ratio']}/{n['cost_ratio']}" for i, (o, n) in enumerate(zip(old, new, strict=True))}
    return {
        **figures,
        **pairs,
        "old_exact": f"{sum(1 for o in old if o['exact'])}/{len(old)}",
        "new_exact": f"{sum(1 for n in new if n['exact'])}/{len(new)}",
        "old_cost_ratio": _mean(old, "cost_ratio"),
        "cost_ratio": _mean(new, "cost_ratio"),
        "old_delivered_over_ingested": _mean(old, "delivered_over_ingested"),
        "delivered_over_ingested": _mean(new, "delivered_over_ingested"),
    }


def _curve(span_s: int, fanouts: list[int], endpoints: list[int]) -> dict[str, object]:
    """Issue 48's curve: one run per number of destinations per event and per number of endpoints (one
    destination each), each paced so that the sink is offered about ``CURVE_REQUESTS_PER_S`` requests a second
    whatever the shape (wrk's per-connection delay), CPU per delivered request for each (all processes, and
    Postgres + worker)."""
    shapes = [(f"d{n}", {"fanout": n, "delay_ms": _pace(n)}) for n in fanouts]
    shapes += [(f"e{n}", {"endpoints": n, "delay_ms": _pace(1)}) for n in endpoints]
    curve: dict[str, object] = {}
    for n, shape in shapes:
        try:
            run_figures = _once(span_s, **shape)
        except Exception as exc:  # noqa: BLE001 - one shape failing keeps the others' figures
            curve[f"{n}_failed"] = type(exc).__name__
            continue
        curve[f"{n}_ledger"] = run_figures["ledger"]
        curve[f"{n}_requests_per_s"] = round(
            float(str(run_figures["requests"]))
            * float(str(run_figures["delivered_per_s"]))
            / max(float(str(run_figures["delivered"])), 1)
        )
        curve[f"{n}_pg_worker_us_per_request"] = run_figures["pg_worker_us_per_request"]
        curve[f"{n}_cpu_us_per_request"] = run_figures["cpu_us_per_request"]
    return curve


def _pace(fanout: int) -> int:
    """wrk's per-connection delay for about ``CURVE_REQUESTS_PER_S`` requests a second at the sink."""
    return round(CONNECTIONS * 1000 * fanout / CURVE_REQUESTS_PER_S)


def _ratios(figures: dict[str, object]) -> dict[str, float]:
    """A run's two ratios (and whether its ledger was exact), whichever checkout's bench code measured it."""
    return {
        "cost_ratio": float(str(figures["cost_ratio"])),
        "delivered_over_ingested": round(
            float(str(figures["delivered_per_s"])) / max(float(str(figures["ingest_rps"])), 1), 3
        ),
        "exact": float(figures["ledger"] == "exact"),
    }


def _mean(runs: list[dict[str, float]], key: str) -> float:
    return round(sum(r[key] for r in runs) / max(len(runs), 1), 3)
