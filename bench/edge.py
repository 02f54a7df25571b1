"""Edge ingest throughput against a bare granian raw-ASGI app, alternated in one run with the same load.

Targets (``TARGETS``): edge ≥ 0.85 × hello, with a signature-checking endpoint, every 2xx durable
in Redis; and p99 ≤ 5 ms at half of the edge's peak rate, measured last by a paced wrk round at half the
peak just measured (``half_peak_*``). ``floor_*`` is ``bench.floor`` in the same rounds: the durable
batched write alone, without the edge's per-request work. The edge's stream is emptied between rounds (no
flush worker competes for the two cores).

Rounds are short (``ROUND_S``) and many: on two cores shared with wrk, where the scheduler happens to put
granian's Python thread moves one app's rate by up to 40% from round to round, so the ratio is the mean
over every round of each app, not one pair. ``*_main_us`` is CPU time of granian's main thread (the one
running the app's Python; the scheduler's nanosecond count) per request, median over the rounds: it varies
far less with placement, and says how much Python each app costs per request.

The two near-1 ratios (tracing off, full catalog) compare three apps (``TOGETHER``) that also run at the
same time, ``TOGETHER_RUNS`` times a round, each under its own wrk: each such run gives one ratio per pair
measured over the same seconds, and the figure is the median of those ratios (``_paired``), not a ratio of
two medians. Run one after the other, the same apps' CPU per request moved by ±15% between neighbouring 2 s
runs on a loaded machine (whatever the other users did in those seconds), at the same time by ±5%. Those
three run in processes started anew each round, so what one process drew at start (``FACTORIES``) averages
out over the rounds instead of biasing the whole run. Before
this, one ratio of two medians, the apps always in one order, read 0.889 and 0.913 for two code differences
callgrind counts at 0.15% (docs/adr/0063-edge-ratios-side-by-side.md). ``*_quartiles`` is the middle half
of the runs' ratios, to read the median against; ``together_edge_us`` the edge's CPU per request in those
runs (higher than alone: three apps and three wrk share two cores).

The ``cluster_*`` figures come last, from ``bench.cluster``: two edge processes against one Redis and
against a three-master Redis Cluster, alternated, once the single-edge rounds are over.

Tracing (docs/adr/0061-one-trace-per-webhook.md) adds two apps to every round: ``untraced``, the same edge
with its instrumentation lines taken out (``bench.untraced``), and ``traced``, the edge exporting a span per
request at full sampling (``OTEL_TRACES_SAMPLER=always_on``) to a collector that answers at once (the
benches' sink). ``tracing_off_ratio`` is untraced over edge in CPU per request (what the instrumentation
costs when off: at least 0.98), ``tracing_on_ratio`` untraced over traced (what a span per request costs).

The provider catalog (docs/adr/0054-provider-catalog.md) adds ``four_kinds``: the same edge with the catalog's
step taken out (``bench.four_kinds``). ``catalog_ratio`` is four_kinds over edge in CPU per request (what
recognising a provider by one header-name lookup costs the usual request: at least 0.97), and
``catalog_rps_ratio`` the same in requests per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psutil
import redis

from bench import sink
from bench.cluster import cluster_round
from bench.infra import bench_env, free_port, granian, run_process
from bench.request import SECRET, payload
from bench.results import Target
from bench.setup import create_endpoint
from bench.wrk import WrkResult, run_wrk, run_wrk_paced

__all__ = ("SECRET", "payload", "run")

TARGETS = (
    Target(
        figure="edge ingest, verification on, every 2xx in Redis, over a bare granian app (same rounds)",
        key="ratio",
        bound=0.85,
        unit="×",
        beside=("edge_rps", "hello_rps", "rounds", "round_ratio_min", "round_ratio_max"),
    ),
    Target(
        figure="CPU of granian's Python thread per request, edge (median of the rounds)",
        key="edge_main_us",
        unit=" µs",
        beside=("floor_main_us", "hello_main_us"),
    ),
    Target(
        figure="edge latency p99 at half its peak (paced wrk -c64)",
        key="half_peak_p99_ms",
        op="<=",
        bound=5,
        unit=" ms",
        beside=("half_peak_rps",),
    ),
    Target(
        figure="two edges against a three-master Redis Cluster, over one Redis",
        key="cluster_vs_one_redis",
        unit="×",
        beside=("cluster_two_edges_rps", "one_redis_two_edges_rps", "cluster_errors"),
    ),
    Target(
        figure="edge with tracing off over the same code without its instrumentation (CPU per request, side by side)",
        key="tracing_off_ratio",
        bound=0.98,
        unit="×",
        beside=("tracing_off_quartiles", "together_runs", "together_edge_us"),
    ),
    Target(
        figure="edge with the full provider catalog over the four kinds alone (CPU per request, side by side)",
        key="catalog_ratio",
        bound=0.97,
        unit="×",
        beside=("catalog_quartiles", "together_runs", "catalog_rps_ratio"),
    ),
    Target(
        figure="edge tracing every request / 5% of them (OTLP to a local collector), over untraced",
        key="tracing_on_ratio",
        unit="×",
        beside=("tracing_sampled_ratio", "traced_main_us", "sampled_main_us", "untraced_main_us"),
    ),
)
"""The edge's promise (docs/architecture.md, "Speed"): nearly as fast as an app that stores nothing."""


ROUND_S = 2.0
CLUSTER_S = 120.0
"""At most this long for the cluster rounds, however long the single-edge rounds."""

TOGETHER = ("edge", "four_kinds", "untraced")
"""The apps the two near-1 targets compare (tracing off, full catalog): besides their turn in each round's
sequence, they also run at the same time, each under its own wrk with a third of the connections,
``TOGETHER_RUNS`` times a round (:func:`_together`). Each such run gives one ratio of each pair measured over
the same seconds, so what the other users of the machine do then weighs on both alike."""
TOGETHER_RUNS = 4
FACTORIES = {
    "edge": "bench.shipped:create_app",  # loaded as the other two are: bench.shipped
    "four_kinds": "bench.four_kinds:create_app",
    "untraced": "bench.untraced:create_app",
}
"""What starts each ``TOGETHER`` app. Each round starts the three anew for its runs together, and every app of
the bench runs with ``PYTHONHASHSEED=0``: a process keeps what it drew at start (its strings' hash seed, so
its dicts' and sets' collisions; where its heap landed) for its whole life, so the same three processes all
run long can favour one app by a few percent that no number of runs averages out; ten sets of processes do."""


class _MainThread:
    """CPU of a granian worker's main thread, the one that runs the ASGI app: the scheduler's own count in
    nanoseconds (``/proc/<pid>/task/<tid>/schedstat``), where the kernel has it; else user + system time in
    clock ticks (10 ms: a 2 s round of 25,000 requests would read ±2% from rounding alone)."""

    def __init__(self, server: subprocess.Popen) -> None:
        self._server = psutil.Process(server.pid)
        self._worker: psutil.Process | None = None

    def cpu_s(self) -> float:
        if self._worker is None:  # --workers 1; spawned by the time the app has answered
            self._worker = self._server.children()[0]
        pid = self._worker.pid
        try:
            with open(f"/proc/{pid}/task/{pid}/schedstat") as stat:
                return int(stat.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            thread = next(t for t in self._worker.threads() if t.id == pid)
            return thread.user_time + thread.system_time


def _measured(main: _MainThread, url: str, body: bytes, headers: dict[str, str]) -> tuple[WrkResult, float]:
    """A wrk round, and the main thread's CPU microseconds per request during it."""
    before = main.cpu_s()
    result = run_wrk(url, seconds=ROUND_S, body=body, headers=headers)
    return result, (main.cpu_s() - before) / max(result.requests, 1) * 1e6


def _order(names: tuple[str, ...], index: int) -> list[str]:
    """Round ``index``'s sequence: every app, rotated by the round, so none always follows the same one."""
    shift = index % len(names)
    return [*names[shift:], *names[:shift]]


@contextlib.contextmanager
def _started(env: dict[str, str], token: str) -> Iterator[dict[str, tuple[str, _MainThread]]]:
    """The ``TOGETHER`` apps in processes of their own, for one round: each one's ingest URL and main thread."""
    with contextlib.ExitStack() as stack:
        apps = {}
        for name in TOGETHER:
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            server = stack.enter_context(run_process(granian(FACTORIES[name], port), env, f"{base}/healthz"))
            apps[name] = (f"{base}/h/{token}", _MainThread(server))
        yield apps


def _together(
    apps: dict[str, tuple[str, _MainThread]], body: bytes, headers: dict[str, str], seconds: float = ROUND_S
) -> tuple[dict[str, float], int]:
    """One run of the ``TOGETHER`` apps at once: each one's main-thread CPU microseconds per request, and
    the requests none of them answered with a 2xx."""
    before = {name: apps[name][1].cpu_s() for name in TOGETHER}
    connections = 64 // len(TOGETHER)
    with ThreadPoolExecutor(len(TOGETHER)) as pool:
        futures = {
            name: pool.submit(
                run_wrk, apps[name][0], seconds=seconds, body=body, headers=headers, connections=connections, threads=1
            )
            for name in TOGETHER
        }
        results = {name: future.result() for name, future in futures.items()}
    cpu_us = {name: (apps[name][1].cpu_s() - before[name]) / max(results[name].requests, 1) * 1e6 for name in TOGETHER}
    return cpu_us, sum(r.errors for r in results.values())


def _paired(per_round: dict[str, list[float]], over: str, under: str) -> list[float]:
    """Each round's (or run's) figure of ``over`` divided by ``under``'s, both measured in it."""
    return [o / u for o, u in zip(per_round[over], per_round[under], strict=True)]


def _spread(ratios: list[float]) -> str:
    """The middle half of the ratios (first to third quartile), to read their median against."""
    if len(ratios) < 2:
        return "n/a"
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return f"{q1:.3f}-{q3:.3f}"


def run(seconds: float) -> dict[str, object]:
    with bench_env(max_body_bytes=1_048_576) as bench:
        endpoint = asyncio.run(create_endpoint(bench.settings, secret=SECRET, tolerance_s=3600))
        edge_port, hello_port, floor_port = free_port(), free_port(), free_port()
        untraced_port, traced_port, collector_port, sampled_port = free_port(), free_port(), free_port(), free_port()
        four_kinds_port = free_port()
        body, headers = payload()
        names = ("hello", "floor", "edge", "four_kinds", "untraced", "traced", "sampled")
        rounds = max(3, round(seconds / ((len(names) + TOGETHER_RUNS) * ROUND_S)))  # 22 s a round
        runs: dict[str, list[WrkResult]] = {name: [] for name in names}
        main_us: dict[str, list[float]] = {name: [] for name in names}
        together: dict[str, list[float]] = {name: [] for name in TOGETHER}
        together_errors = 0
        client = redis.Redis.from_url(bench.settings.redis_url)
        edge_url = f"http://127.0.0.1:{edge_port}"
        hello_url, floor_url = f"http://127.0.0.1:{hello_port}/", f"http://127.0.0.1:{floor_port}/"
        untraced_url, traced_url = f"http://127.0.0.1:{untraced_port}", f"http://127.0.0.1:{traced_port}"
        sampled_url = f"http://127.0.0.1:{sampled_port}"
        four_kinds_url = f"http://127.0.0.1:{four_kinds_port}"
        env = {**bench.env, "PYTHONHASHSEED": "0"}  # every app hashes its strings alike (see FACTORIES)
        tracing_env = {
            **env,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector_port}",
            "OTEL_TRACES_SAMPLER": "always_on",
        }
        sampling_env = {
            **tracing_env,
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.05",
        }
        with (
            run_process(granian("edge.app:create_app", edge_port), env, f"{edge_url}/healthz") as edge,
            run_process(granian("bench.hello:app", hello_port, factory=False), env, hello_url) as hello,
            run_process(granian("bench.floor:app", floor_port, factory=False), env, floor_url) as floor,
            run_process(
                granian("bench.untraced:create_app", untraced_port), env, f"{untraced_url}/healthz"
            ) as untraced,
            run_process(
                granian("bench.four_kinds:create_app", four_kinds_port), env, f"{four_kinds_url}/healthz"
            ) as four_kinds,
            run_process(sink.command(collector_port), env, f"http://127.0.0.1:{collector_port}/"),
            run_process(granian("edge.app:create_app", traced_port), tracing_env, f"{traced_url}/healthz") as traced,
            run_process(
                granian("edge.app:create_app", sampled_port), sampling_env, f"{sampled_url}/healthz"
            ) as sampled,
        ):
            streams = bench.settings.redis_prefix + "*{ingest*"

            def empty() -> None:
                client.delete(*list(client.scan_iter(match=streams)) or ["-"])

            ingest = f"{edge_url}/h/{endpoint.token}"
            apps = {
                "hello": (hello_url, _MainThread(hello)),
                "floor": (floor_url, _MainThread(floor)),
                "edge": (ingest, _MainThread(edge)),
                "four_kinds": (f"{four_kinds_url}/h/{endpoint.token}", _MainThread(four_kinds)),
                "untraced": (f"{untraced_url}/h/{endpoint.token}", _MainThread(untraced)),
                "traced": (f"{traced_url}/h/{endpoint.token}", _MainThread(traced)),
                "sampled": (f"{sampled_url}/h/{endpoint.token}", _MainThread(sampled)),
            }
            for url, _ in apps.values():  # warm every app
                run_wrk(url, seconds=1, body=body, headers=headers)
            for index in range(rounds):
                for name in _order(names, index):
                    url, main = apps[name]
                    empty()
                    result, cpu_us = _measured(main, url, body, headers)
                    runs[name].append(result)
                    main_us[name].append(cpu_us)
                with _started(env, endpoint.token) as fresh:  # new processes each round (see FACTORIES)
                    _together(fresh, body, headers, seconds=1)  # warm
                    for _ in range(TOGETHER_RUNS):
                        empty()
                        cpu, errors = _together(fresh, body, headers)
                        together_errors += errors
                        for name, value in cpu.items():
                            together[name].append(value)
            stored = sum(
                len(client.xrange(k)) for k in client.scan_iter(match=bench.settings.redis_prefix + "{ingest*")
            )
            edge_runs = runs["edge"]
            half = statistics.mean(r.rps for r in edge_runs) / 2
            empty()
            paced = run_wrk_paced(ingest, rate=half, seconds=max(3.0, ROUND_S), body=body, headers=headers)
        client.close()
        cluster = cluster_round(bench, SECRET, body, headers, min(seconds, CLUSTER_S))
    rps = {name: [r.rps for r in results] for name, results in runs.items()}
    ratios = _paired(rps, "edge", "hello")
    edge_rps, hello_rps, floor_rps = (statistics.mean(rps[n]) for n in ("edge", "hello", "floor"))
    untraced_rps, traced_rps, sampled_rps = (statistics.mean(rps[n]) for n in ("untraced", "traced", "sampled"))
    four_kinds_rps = statistics.mean(rps["four_kinds"])
    # The two near-1 figures: CPU of granian's Python thread per request, the median over the runs together
    # of each run's ratio (both apps measured over the same seconds), not a ratio of two medians.
    tracing_off = _paired(together, "untraced", "edge")
    catalog_cpu = _paired(together, "four_kinds", "edge")
    tracing = {
        "untraced_rps": round(untraced_rps),
        "traced_rps": round(traced_rps),
        "sampled_rps": round(sampled_rps),
        "tracing_off_rps_ratio": round(statistics.median(_paired(rps, "edge", "untraced")), 3),
        "tracing_on_rps_ratio": round(statistics.median(_paired(rps, "traced", "untraced")), 3),
        "traced_errors": sum(r.errors for r in runs["traced"]),
        "tracing_on_ratio": round(statistics.median(_paired(main_us, "untraced", "traced")), 3),
        "tracing_sampled_ratio": round(statistics.median(_paired(main_us, "untraced", "sampled")), 3),
        "together_runs": len(tracing_off),
        "together_errors": together_errors,
        "together_edge_us": round(statistics.median(together["edge"]), 2),
        "tracing_off_quartiles": _spread(tracing_off),
    }
    catalog = {
        "four_kinds_rps": round(four_kinds_rps),
        "catalog_rps_ratio": round(statistics.median(_paired(rps, "edge", "four_kinds")), 3),
        "catalog_quartiles": _spread(catalog_cpu),
    }
    return {
        "ratio": round(edge_rps / hello_rps, 3),
        "rounds": rounds,
        "round_ratio_min": round(min(ratios), 3),
        "round_ratio_max": round(max(ratios), 3),
        "edge_rps": round(edge_rps),
        "hello_rps": round(hello_rps),
        "floor_rps": round(floor_rps),
        "floor_ratio": round(floor_rps / hello_rps, 3),
        "p50_ms": round(statistics.mean(r.p50_ms for r in edge_runs), 2),
        "p99_ms": round(statistics.mean(r.p99_ms for r in edge_runs), 2),
        "edge_errors": sum(r.errors for r in edge_runs),
        **{f"{name}_main_us": round(statistics.median(values), 2) for name, values in main_us.items()},
        "stream_entries_last_round": stored,
        "half_peak_rps": round(paced.rps),
        "half_peak_p50_ms": round(paced.p50_ms, 2),
        "half_peak_p99_ms": round(paced.p99_ms, 2),
        "half_peak_errors": paced.errors,
        **cluster,
        **tracing,
        **catalog,
        "tracing_off_ratio": round(statistics.median(tracing_off), 3),
        "catalog_ratio": round(statistics.median(catalog_cpu), 3),
    }
