"""Edge ingest throughput against a bare granian raw-ASGI app, alternated in one run with the same load.

Targets (DESIGN.md section 6): edge ≥ 0.85 × hello, with a signature-checking endpoint, every 2xx durable
in Redis; and p99 ≤ 5 ms at half of the edge's peak rate, measured last by a paced wrk round at half the
peak just measured (``half_peak_*``). ``floor_*`` is ``bench.floor`` in the same rounds: the durable
batched write alone, without the edge's per-request work. The edge's stream is emptied between rounds (no
flush worker competes for the two cores).

Rounds are short (``ROUND_S``) and many: on two cores shared with wrk, where the scheduler happens to put
granian's Python thread moves one app's rate by up to 40% from round to round, so the ratio is the mean
over every round of each app, not one pair. ``*_main_us`` is CPU time of the granian worker's main thread
(the one running the app's Python) per request, median over the rounds: it varies far less with placement,
and says how much Python each app costs per request.

The ``cluster_*`` figures come last, from ``bench.cluster``: two edge processes against one Redis and
against a three-master Redis Cluster, alternated, once the single-edge rounds are over.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess

import psutil
import redis

from bench.cluster import cluster_round
from bench.infra import bench_env, free_port, granian, run_process
from bench.request import SECRET, payload
from bench.setup import create_endpoint
from bench.wrk import WrkResult, run_wrk, run_wrk_paced

__all__ = ("SECRET", "payload", "run")

ROUND_S = 2.0


class _MainThread:
    """CPU seconds of a granian worker's main thread, the one that runs the ASGI app."""

    def __init__(self, server: subprocess.Popen) -> None:
        self._server = psutil.Process(server.pid)

    def cpu_s(self) -> float:
        worker = self._server.children()[0]  # --workers 1; spawned by the time the app has answered
        thread = next(t for t in worker.threads() if t.id == worker.pid)
        return thread.user_time + thread.system_time


def _measured(main: _MainThread, url: str, body: bytes, headers: dict[str, str]) -> tuple[WrkResult, float]:
    """A wrk round and the main thread's CPU microseconds per request during it."""
    before = main.cpu_s()
    result = run_wrk(url, seconds=ROUND_S, body=body, headers=headers)
    return result, (main.cpu_s() - before) / max(result.requests, 1) * 1e6


def run(seconds: float) -> dict[str, object]:
    with bench_env(max_body_bytes=1_048_576) as bench:
        endpoint = asyncio.run(create_endpoint(bench.settings, secret=SECRET, tolerance_s=3600))
        edge_port, hello_port, floor_port = free_port(), free_port(), free_port()
        body, headers = payload()
        rounds = max(3, round(seconds / (3 * ROUND_S)))
        runs: dict[str, list[WrkResult]] = {"hello": [], "floor": [], "edge": []}
        main_us: dict[str, list[float]] = {"hello": [], "floor": [], "edge": []}
        client = redis.Redis.from_url(bench.settings.redis_url)
        edge_url = f"http://127.0.0.1:{edge_port}"
        hello_url, floor_url = f"http://127.0.0.1:{hello_port}/", f"http://127.0.0.1:{floor_port}/"
        with (
            run_process(granian("edge.app:create_app", edge_port), bench.env, f"{edge_url}/healthz") as edge,
            run_process(granian("bench.hello:app", hello_port, factory=False), bench.env, hello_url) as hello,
            run_process(granian("bench.floor:app", floor_port, factory=False), bench.env, floor_url) as floor,
        ):
            streams = bench.settings.redis_prefix + "*{ingest*"

            def empty() -> None:
                client.delete(*list(client.scan_iter(match=streams)) or ["-"])

            ingest = f"{edge_url}/h/{endpoint.token}"
            apps = {
                "hello": (hello_url, _MainThread(hello)),
                "floor": (floor_url, _MainThread(floor)),
                "edge": (ingest, _MainThread(edge)),
            }
            for url, _ in apps.values():  # warm every app
                run_wrk(url, seconds=1, body=body, headers=headers)
            for _ in range(rounds):
                for name, (url, main) in apps.items():
                    empty()
                    result, cpu_us = _measured(main, url, body, headers)
                    runs[name].append(result)
                    main_us[name].append(cpu_us)
            stored = sum(
                len(client.xrange(k)) for k in client.scan_iter(match=bench.settings.redis_prefix + "{ingest*")
            )
            edge_runs = runs["edge"]
            half = statistics.mean(r.rps for r in edge_runs) / 2
            empty()
            paced = run_wrk_paced(ingest, rate=half, seconds=max(3.0, ROUND_S), body=body, headers=headers)
        client.close()
        cluster = cluster_round(bench, SECRET, body, headers, seconds)
    hello_runs, floor_runs = runs["hello"], runs["floor"]
    ratios = [e.rps / h.rps for e, h in zip(edge_runs, hello_runs, strict=True)]
    edge_rps = statistics.mean(r.rps for r in edge_runs)
    hello_rps = statistics.mean(r.rps for r in hello_runs)
    floor_rps = statistics.mean(r.rps for r in floor_runs)
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
    }
