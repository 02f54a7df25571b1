"""The edge ASGI app outside the ingest path: health, unknown routes, lifespan."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis

from edge.app import EDGE_GC_THRESHOLD, EdgeApp, create_app
from shared.settings import load_settings
from tests.helpers import assert_error


@pytest.fixture
async def edge_http(edge_settings) -> AsyncIterator[httpx.AsyncClient]:
    """The edge app started (its lifespan run) behind httpx's ASGI transport: requests as a client sends them."""
    app = create_app(edge_settings)
    await app.startup()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge.test") as c:
            yield c
    finally:
        await app.shutdown()


async def test_healthz(edge_http):
    resp = await edge_http.get("/healthz")
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.json() == {"ok": True}
    assert resp.headers["content-length"] == str(len(resp.content))


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/"), ("GET", "/nope"), ("POST", "/v1/endpoints"), ("GET", "/hx")]
)
async def test_unknown_paths_are_404_in_the_envelope(edge_http, method, path):
    resp = await edge_http.request(method, path)
    err = assert_error(resp, 404, "not_found")
    assert path in err["message"]


async def test_healthz_is_503_when_redis_is_unreachable(servers, redis_prefix):
    # Port 1 on loopback refuses connections at once.
    s = load_settings({}, redis_url="redis://127.0.0.1:1/0", redis_prefix=redis_prefix)
    app = EdgeApp(s)
    app.redis = aioredis.Redis.from_url(s.redis_url)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge.test") as c:
            resp = await asyncio.wait_for(c.get("/healthz"), 10)
        assert_error(resp, 503, "unavailable")
    finally:
        await app.redis.aclose()


async def test_lifespan_protocol(edge_settings):
    app = create_app(edge_settings)
    inbox: asyncio.Queue[dict] = asyncio.Queue()
    sent: list[dict] = []

    async def receive() -> dict:
        return await inbox.get()

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "lifespan.startup.complete":
            frozen.append(gc.get_freeze_count())
            serving.append(gc.get_threshold())

    frozen: list[int] = []
    serving: list[tuple[int, ...]] = []
    before = gc.get_threshold()
    await inbox.put({"type": "lifespan.startup"})
    await inbox.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send), 15)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    # Start-up's objects are out of the collector's sight while serving, and handed back at shutdown; the
    # youngest generation is collected less often while serving, and the interpreter's setting comes back.
    assert frozen[0] > 0
    assert gc.get_freeze_count() == 0
    assert serving == [(EDGE_GC_THRESHOLD, *before[1:])]
    assert gc.get_threshold() == before


async def test_lifespan_reports_a_failed_startup(servers, redis_prefix, monkeypatch):
    app = create_app(load_settings({}, redis_url=servers.redis_url, redis_prefix=redis_prefix))

    async def broken() -> None:
        raise RuntimeError("cannot start")

    monkeypatch.setattr(app, "startup", broken)
    inbox: asyncio.Queue[dict] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    await asyncio.wait_for(app({"type": "lifespan"}, inbox.get, send), 5)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "cannot start" in sent[0]["message"]


def test_edge_refuses_to_start_without_redis():
    with pytest.raises(ValueError, match="REDIS_URL"):
        create_app(load_settings({}))
