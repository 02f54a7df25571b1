"""The Redis Cluster round of ``bench edge``: two edge processes against one Redis, then the same two
against a three-master Redis Cluster (started here from ``redis-server`` 7+ on loopback), alternated.

Each edge gets its own wrk and its own endpoint, the two endpoints on shards whose slots live on different
masters (``HOOKYARD_STREAM_SHARDS=4``), so the cluster round writes to two nodes at once. On this 2-core
machine the two edges, two wrk and the Redis servers share the cores: the figure says what the cluster
path costs the edge next to one Redis, not how far a cluster of real hosts goes. The last cluster round is
counted afterwards: every record in the cluster's streams against the 2xx wrk saw (``cluster_stored`` ≥
``cluster_acked``; wrk does not count answers still in flight when it stops).
"""

from __future__ import annotations

import asyncio
import statistics
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import msgspec
from redis.crc import key_slot

from bench.infra import Bench, free_port, granian, run_process
from bench.redis_cluster import ClusterNodes, redis_server_7, running_cluster  # the tests' cluster too
from bench.setup import BenchEndpoint, create_endpoint
from bench.wrk import WrkResult, run_wrk
from shared import redis_client
from shared.keys import Keys
from shared.settings import Settings
from shared.wire import decode_records

__all__ = ("cluster_round",)

SHARDS = 4


async def _endpoints_on_two_masters(settings: Settings, keys: Keys, secret: str) -> list[BenchEndpoint]:
    """Two endpoints whose shards' slots sit in different thirds of the slot range (different masters)."""
    by_third: dict[int, BenchEndpoint] = {}
    while len(by_third) < 2:
        endpoint = await create_endpoint(settings, secret=secret, tolerance_s=3600)
        third = key_slot(keys.ingest_stream(keys.shard_for(endpoint.id)).encode()) * 3 // 16384
        by_third.setdefault(third, endpoint)
    return list(by_third.values())


async def _stored(url: str, keys: Keys, *, empty: bool) -> int:
    """Records in the ingest streams (deleting the streams when ``empty``)."""
    client = await redis_client.open_client(url)
    try:
        count = 0
        for stream in keys.ingest_streams():
            if empty:
                await client.delete(stream)
            else:
                count += sum(len(decode_records(f[b"r"])) for _, f in await client.xrange(stream))
        return count
    finally:
        await client.aclose()


def _both(urls: list[str], body: bytes, headers: dict[str, str], seconds: float) -> list[WrkResult]:
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run_wrk, u, seconds=seconds, body=body, headers=headers, connections=32) for u in urls]
        return [r.result() for r in runs]


def cluster_round(bench: Bench, secret: str, body: bytes, headers: dict[str, str], seconds: float) -> dict:
    binaries = redis_server_7()
    if binaries is None:
        return {"cluster": "skipped_no_redis_7"}
    round_s = 2.0
    rounds = max(2, round(seconds / (2 * round_s)))
    with running_cluster(*binaries, prefix="hookyard-bench-cluster-") as cluster:
        return _rounds(bench, cluster, secret, body, headers, rounds, round_s)


def _rounds(
    bench: Bench,
    cluster: ClusterNodes,
    secret: str,
    body: bytes,
    headers: dict[str, str],
    rounds: int,
    round_s: float,
) -> dict:
    with ExitStack() as running:
        targets: dict[str, list[str]] = {}
        keys = {
            "one": Keys(bench.settings.redis_prefix, SHARDS),
            "cluster": Keys(bench.settings.redis_prefix, SHARDS, cluster=True),  # the names hookyard picks there
        }
        for name, url in (("one", bench.settings.redis_url), ("cluster", cluster.url)):
            settings = msgspec.structs.replace(bench.settings, redis_url=url, stream_shards=SHARDS)
            endpoints = asyncio.run(_endpoints_on_two_masters(settings, keys[name], secret))
            env = {**bench.env, "REDIS_URL": url, "HOOKYARD_STREAM_SHARDS": str(SHARDS)}
            targets[name] = []
            for endpoint in endpoints:
                port = free_port()
                edge = f"http://127.0.0.1:{port}"
                running.enter_context(run_process(granian("edge.app:create_app", port), env, f"{edge}/healthz"))
                targets[name].append(f"{edge}/h/{endpoint.token}")
        urls = {"one": bench.settings.redis_url, "cluster": cluster.url}
        for name in targets:  # warm both pairs
            _both(targets[name], body, headers, 1.0)
        results: dict[str, list[list[WrkResult]]] = {"one": [], "cluster": []}
        for _ in range(rounds):
            for name in ("one", "cluster"):
                asyncio.run(_stored(urls[name], keys[name], empty=True))
                results[name].append(_both(targets[name], body, headers, round_s))
        stored = asyncio.run(_stored(cluster.url, keys["cluster"], empty=False))
    last = results["cluster"][-1]
    rps = {name: statistics.mean(sum(r.rps for r in pair) for pair in runs) for name, runs in results.items()}
    return {
        "cluster_rounds": rounds,
        "one_redis_two_edges_rps": round(rps["one"]),
        "cluster_two_edges_rps": round(rps["cluster"]),
        "cluster_vs_one_redis": round(rps["cluster"] / rps["one"], 3),
        "cluster_p99_ms": round(statistics.mean(max(r.p99_ms for r in pair) for pair in results["cluster"]), 2),
        "cluster_errors": sum(r.errors for pair in results["cluster"] for r in pair),
        "cluster_acked": sum(r.requests - r.errors for r in last),
        "cluster_stored": stored,
    }
