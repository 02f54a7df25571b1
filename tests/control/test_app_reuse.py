"""One control app, one lifespan after another, each with its own settings (``control.app.bind``, ADR 0044):
the tests serve one app per process this way, so nothing of a lifespan may outlive it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from control.app import bind, create_app
from shared.settings import Settings
from tests.apps import control_app
from tests.conftest import Servers, _admin, make_account, with_database

LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


@pytest.fixture
async def other_database(servers: Servers, template_database: str) -> AsyncIterator[str]:
    name = f"hy_t_{uuid.uuid4().hex[:16]}"
    await _admin(servers, f"CREATE DATABASE {name} TEMPLATE {template_database}")
    try:
        yield with_database(servers.database_url, name)
    finally:
        await _admin(servers, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_a_second_lifespan_runs_on_the_settings_bound_to_it(settings: Settings, other_database: str) -> None:
    first = msgspec.structs.replace(settings, public_control_url="https://first.example.com")
    second = msgspec.structs.replace(
        settings,
        database_url=other_database,
        redis_prefix=settings.redis_prefix + "2:",
        public_control_url="https://second.example.com",
    )
    one, two = await make_account(first.database_url), await make_account(second.database_url)
    app = create_app(first)
    for bound, mine, theirs in ((first, one, two), (second, two, one), (first, one, two)):
        bind(app, bound)
        async with AsyncTestClient(app=app) as client:
            assert (await client.get("/v1/endpoints", headers=mine.headers)).status_code == 200
            assert (await client.get("/v1/endpoints", headers=theirs.headers)).status_code == 401
            llms = await client.get("/llms.txt")  # cached in app.state: the cache is the lifespan's
            assert f"at {bound.public_control_url}." in llms.text
            listing = await client.post("/mcp", json=LISTING, headers={**mine.headers, **MCP_HEADERS})
            assert listing.status_code == 200, listing.text  # the SDK's session manager runs once: one per lifespan
            assert client.app.state.ctx.keys.prefix == bound.redis_prefix


def test_settings_of_another_shape_are_refused(settings: Settings) -> None:
    app = create_app(settings)
    larger = msgspec.structs.replace(settings, max_body_bytes=4 * settings.max_body_bytes)
    with pytest.raises(ValueError, match="shape"):
        bind(app, larger)


def test_an_app_serves_one_caller_at_a_time(settings: Settings) -> None:
    with control_app(settings) as first, control_app(settings) as second:
        assert first is not second
    with control_app(settings) as again:
        assert again in (first, second)


async def test_mcp_starts_with_its_first_calls_all_answered(settings: Settings) -> None:
    """The SDK starts with the first POST to /mcp (control.mcp.mount): calls arriving together while it
    starts all wait for the one start, and a lifespan that never served /mcp ends as cleanly as one that did."""
    account = await make_account(settings.database_url)
    with control_app(settings) as app:
        async with AsyncTestClient(app=app) as client:
            assert (await client.get("/v1/endpoints", headers=account.headers)).status_code == 200
        async with AsyncTestClient(app=app) as client:
            headers = {**account.headers, **MCP_HEADERS}
            calls = [client.post("/mcp", json={**LISTING, "id": i}, headers=headers) for i in range(8)]
            answers = await asyncio.gather(*calls)
            assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]
            assert all('"create_endpoint"' in a.text for a in answers)
