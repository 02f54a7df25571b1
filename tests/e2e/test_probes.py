"""The probes deploy/k8s points at, on real processes through a Redis that goes away: ``/livez`` answers 200 on
the edge, control and a worker's metrics port while ``/healthz`` says 503, and ingest keeps answering 503 with
Retry-After. Liveness and readiness were ``/healthz``: a trial's Redis outage restarted every edge and control
pod after a minute and took every edge out of its Service, so senders got refused connections. The edge runs
with only the variables its pod gets (``REDIS_URL``, no ``DATABASE_URL`` nor encryption keys)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.redis_relay import RedisRelay
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


async def test_livez_answers_through_a_redis_outage(settings: Settings, tmp_path: Path) -> None:
    worker_port = free_port()
    async with RedisRelay(settings.redis_url or "") as relay:
        stack = Stack(settings, tmp_path, REDIS_URL=relay.url, HOOKYARD_WORKER_METRICS_PORT=str(worker_port))
        edge_env = {k: v for k, v in stack.env.items() if k not in ("DATABASE_URL", "HOOKYARD_ENCRYPTION_KEYS")}
        try:
            await asyncio.to_thread(stack.start_control)
            await asyncio.to_thread(stack.start_worker, "worker", "flush")
            stack.env = edge_env
            await asyncio.to_thread(stack.start_edge)
            worker_url = f"http://127.0.0.1:{worker_port}"
            async with httpx.AsyncClient(timeout=10, trust_env=False) as http:

                async def worker_serving() -> None:
                    while True:
                        try:
                            if (await http.get(worker_url + "/livez")).status_code == 200:
                                return
                        except httpx.TransportError:
                            pass
                        await asyncio.sleep(0.1)

                await asyncio.wait_for(worker_serving(), 30)
                await relay.cut()
                for url in (stack.edge_url, stack.control_url):
                    assert (await http.get(url + "/healthz")).status_code == 503, url
                for url in (stack.edge_url, stack.control_url, worker_url):
                    live = await http.get(url + "/livez")
                    assert (live.status_code, live.json()) == (200, {"ok": True}), url  # one shape on all three
                ingest = await http.post(stack.edge_url + "/h/no-such-token-0123456789", content=b"{}")
                assert ingest.status_code == 503
                assert "retry-after" in ingest.headers
                other = await http.get(worker_url + "/nothing")
                assert other.status_code == 404
        finally:
            await asyncio.to_thread(stack.stop_all)
