"""Metrics and tenants, on real processes (ADR 0095): a port tenants use never shows another account's ids, and
the operator's scrape of control works where the docs say, on ``HOOKYARD_CONTROL_METRICS_PORT``.

Control's ``/metrics`` used to be served on the API port without a key, and its backlog gauges named every
account's destinations (``hookyard_delivery_backlog{destination_id="dst_…"}``). Here account B's deliveries
wait (no deliver loop runs), so its destination is in the backlog; account A, and anyone without a key, then
look at every path of control's API port and the edge's port that serves metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.conftest import Account, make_account
from tests.helpers import wait_for
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


async def _waiting_backlog(stack: Stack, settings: Settings, scrape_url: str) -> tuple[Account, list[str]]:
    """Account B with an endpoint whose destination has a delivery due and unsent, once ``scrape_url`` (an
    operator's port) lists it; B's ids (account, endpoint, destination, ingest URL) to look for elsewhere."""
    owner = await make_account(settings.database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=owner.headers) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "b-private"})).json()
        created = await api.post(
            f"/v1/endpoints/{endpoint['id']}/destinations",
            json={"url": "http://127.0.0.1:9/never-sent", "forward_all": True},
        )
        assert created.status_code == 201, created.text
        destination_id = created.json()["id"]
    async with httpx.AsyncClient() as sender:
        ack = await sender.post(endpoint["ingest_url"], json={"type": "order.created"})
        assert ack.status_code == 200, ack.text

    async def listed() -> bool:
        async with httpx.AsyncClient() as client:
            try:
                text = (await client.get(scrape_url + "/metrics")).text
            except httpx.ConnectError:  # a worker is not waited for at its start
                return False
        return f'hookyard_delivery_backlog{{destination_id="{destination_id}"}}' in text

    await wait_for(listed, timeout=20, interval=0.2)  # the backlog is read every 5 s
    return owner, [owner.id, endpoint["id"], destination_id, endpoint["ingest_url"].rsplit("/", 1)[-1]]


async def test_no_tenant_facing_port_shows_another_accounts_ids(settings: Settings, tmp_path: Path) -> None:
    """Fails on the code before ADR 0095: control's API port answered ``GET /metrics`` without a key, with
    B's destination id in it."""
    worker_port = free_port()
    stack = Stack(settings, tmp_path, HOOKYARD_WORKER_METRICS_PORT=str(worker_port))
    try:
        stack.start_control()
        stack.start_edge()
        stack.start_worker("worker", "flush")  # no deliver loop: B's delivery stays due
        _, secret = await _waiting_backlog(stack, settings, f"http://127.0.0.1:{worker_port}")
        tenant = await make_account(settings.database_url)
        paths = ("/metrics", "/metrics/", "/metrics?format=text", "/healthz", "/livez")
        async with httpx.AsyncClient() as client:
            for base in (stack.control_url, stack.edge_url):
                for headers in ({}, tenant.headers):
                    for path in paths:
                        resp = await client.get(base + path, headers=headers)
                        assert resp.status_code < 500, (base, path, resp.text)
                        leaked = [s for s in secret if s in resp.text]
                        assert leaked == [], f"{base}{path} shows account B's {leaked}: {resp.text[:300]}"
            answer = await client.get(stack.control_url + "/metrics", headers=tenant.headers)
        assert answer.status_code == 404, answer.text  # not served there at all
        assert answer.json()["error"]["code"] == "not_found"
    finally:
        stack.stop_all()


async def test_the_operator_scrapes_control_on_its_metrics_port(settings: Settings, tmp_path: Path) -> None:
    """Two granian workers both listen on the port (``SO_REUSEPORT``); every scrape, on a new connection
    each, is a whole exposition with the backlog per destination and the control plane's own gauges."""
    worker_port, control_port = free_port(), free_port()
    ports = {"HOOKYARD_WORKER_METRICS_PORT": worker_port, "HOOKYARD_CONTROL_METRICS_PORT": control_port}
    stack = Stack(settings, tmp_path, **ports)
    try:
        stack.start("control", "control", "--port", str(stack.control_port), "--workers", "2", port=stack.control_port)
        stack.start_edge()
        stack.start_worker("worker", "flush")
        operator = f"http://127.0.0.1:{control_port}"
        _, secret = await _waiting_backlog(stack, settings, operator)
        backlog = f'hookyard_delivery_backlog{{destination_id="{secret[2]}"}} 1.0'
        async with httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)) as client:

            async def every_worker_read() -> list[httpx.Response] | None:
                """Each granian worker reads the backlog on its own 5 s timer: the second may not have yet."""
                scrapes = await asyncio.gather(*(client.get(operator + "/metrics") for _ in range(12)))
                assert {s.status_code for s in scrapes} == {200}
                return scrapes if all(backlog in s.text for s in scrapes) else None

            scrapes = await wait_for(every_worker_read, timeout=15, interval=0.5)
            for scrape in scrapes:
                assert scrape.headers["content-type"].startswith("text/plain")
                assert "hookyard_wait_waiters " in scrape.text
                assert 'hookyard_circuits{state="closed"}' in scrape.text
            live = await client.get(operator + "/livez")
            assert live.status_code == 200
            other = await client.get(operator + "/v1/endpoints")
            assert other.status_code == 404
            assert other.json()["error"]["code"] == "not_found"
            api = await client.get(stack.control_url + "/metrics")
            assert api.status_code == 404  # the API port serves none, with the operator port set or not
    finally:
        stack.stop_all()
