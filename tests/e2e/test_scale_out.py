"""Scale-out: two edge processes and two flush workers (each with its lanes) share one Redis and one
Postgres; concurrent senders spread over both edges lose nothing and duplicate nothing."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.conftest import make_account
from tests.e2e.conftest import new_endpoint, stored_events
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


async def test_two_edges_and_two_workers_share_the_load(stack: Stack, database_url: str) -> None:
    stack.env["HOOKYARD_STREAM_SHARDS"] = "2"  # endpoints spread over two shards, each read by both workers
    stack.start_control()
    edges = [stack.start_edge("edge-a"), stack.start_edge("edge-b", port=free_port())]
    stack.start_worker("worker-a", "flush")
    stack.start_worker("worker-b", "flush")
    account = await make_account(database_url)
    endpoints = [new_endpoint(stack, account) for _ in range(4)]
    per_endpoint = 400

    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=32)) as client:
        semaphore = asyncio.Semaphore(32)

        async def send(endpoint: dict, i: int) -> str:
            token = endpoint["ingest_url"].rsplit("/", 1)[-1]
            async with semaphore:
                response = await client.post(f"{edges[i % 2]}/h/{token}", content=b'{"n":%d}' % i)
            assert response.status_code == 200, response.text
            return response.json()["id"]

        acked = await asyncio.gather(*(send(e, i) for e in endpoints for i in range(per_endpoint)))
    assert len(set(acked)) == len(acked)

    stored: list[str] = []
    for endpoint in endpoints:
        events = stored_events(stack, account, endpoint["id"], per_endpoint, timeout_s=30)
        assert len(events) == per_endpoint
        stored += [e["id"] for e in events]
    assert sorted(stored) == sorted(acked)  # every acknowledged event, once
