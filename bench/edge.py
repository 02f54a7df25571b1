"""Edge ingest throughput against a bare granian raw-ASGI app, alternated in one run with the same load.

Targets (DESIGN.md section 6): edge ≥ 0.85 × hello, with a signature-checking endpoint, every 2xx durable
in Redis; and p99 ≤ 5 ms at half of the edge's peak rate, measured last by a paced wrk round at half the
peak just measured (``half_peak_*``). ``floor_*`` is ``bench.floor`` in the same rounds: the durable
batched write alone, without the edge's per-request work. The edge's stream is emptied between rounds (no
flush worker competes for the two cores).
"""

from __future__ import annotations

import asyncio
import statistics

import redis

from bench.infra import bench_env, free_port, granian, run_process
from bench.request import SECRET, payload
from bench.setup import create_endpoint
from bench.wrk import WrkResult, run_wrk, run_wrk_paced

__all__ = ("SECRET", "payload", "run")


def run(seconds: float) -> dict[str, object]:
    with bench_env(max_body_bytes=1_048_576) as bench:
        endpoint = asyncio.run(create_endpoint(bench.settings, secret=SECRET, tolerance_s=3600))
        edge_port, hello_port, floor_port = free_port(), free_port(), free_port()
        body, headers = payload()
        rounds = 2
        per_round = max(2.0, seconds / (2 * rounds))
        edge_runs: list[WrkResult] = []
        hello_runs: list[WrkResult] = []
        floor_runs: list[WrkResult] = []
        client = redis.Redis.from_url(bench.settings.redis_url)
        edge_url = f"http://127.0.0.1:{edge_port}"
        with (
            run_process(granian("edge.app:create_app", edge_port), bench.env, f"{edge_url}/healthz"),
            run_process(granian("bench.hello:app", hello_port, factory=False), bench.env),
            run_process(granian("bench.floor:app", floor_port, factory=False), bench.env),
        ):
            streams = bench.settings.redis_prefix + "*{ingest*"

            def empty() -> None:
                client.delete(*list(client.scan_iter(match=streams)) or ["-"])

            ingest = f"{edge_url}/h/{endpoint.token}"
            run_wrk(ingest, seconds=1, body=body, headers=headers)  # warm both
            run_wrk(f"http://127.0.0.1:{hello_port}/", seconds=1, body=body, headers=headers)
            run_wrk(f"http://127.0.0.1:{floor_port}/", seconds=1, body=body, headers=headers)
            for _ in range(rounds):
                hello_runs.append(
                    run_wrk(f"http://127.0.0.1:{hello_port}/", seconds=per_round, body=body, headers=headers)
                )
                empty()
                floor_runs.append(
                    run_wrk(f"http://127.0.0.1:{floor_port}/", seconds=per_round, body=body, headers=headers)
                )
                empty()
                edge_runs.append(run_wrk(ingest, seconds=per_round, body=body, headers=headers))
            stored = sum(
                len(client.xrange(k)) for k in client.scan_iter(match=bench.settings.redis_prefix + "{ingest*")
            )
            half = statistics.mean(r.rps for r in edge_runs) / 2
            empty()
            paced = run_wrk_paced(ingest, rate=half, seconds=max(3.0, per_round), body=body, headers=headers)
        client.close()
    edge_rps = statistics.mean(r.rps for r in edge_runs)
    hello_rps = statistics.mean(r.rps for r in hello_runs)
    floor_rps = statistics.mean(r.rps for r in floor_runs)
    return {
        "ratio": round(edge_rps / hello_rps, 3),
        "edge_rps": round(edge_rps),
        "hello_rps": round(hello_rps),
        "floor_rps": round(floor_rps),
        "floor_ratio": round(floor_rps / hello_rps, 3),
        "p50_ms": round(statistics.mean(r.p50_ms for r in edge_runs), 2),
        "p99_ms": round(statistics.mean(r.p99_ms for r in edge_runs), 2),
        "edge_errors": sum(r.errors for r in edge_runs),
        "stream_entries_last_round": stored,
        "half_peak_rps": round(paced.rps),
        "half_peak_p50_ms": round(paced.p50_ms, 2),
        "half_peak_p99_ms": round(paced.p99_ms, 2),
        "half_peak_errors": paced.errors,
    }
