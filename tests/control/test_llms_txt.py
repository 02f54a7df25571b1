"""GET /llms.txt: the llmstxt.org format, about this instance (its public URLs), listing every route of the live
route table and every MCP tool, so a route or tool left out fails here."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from litestar import Litestar, get
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from control.app import create_app
from control.mcp.llms import _getting_started
from shared.providers import CATALOG
from shared.settings import Settings

CONTROL = "https://hooks.example.com"
EDGE = "https://in.example.com"
LINK_LINE = re.compile(r"^- \[(?P<name>[^\]]+)\]\((?P<url>https://[^)\s]+)\)(?P<notes>: .+)?$")


@pytest.fixture
def public(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, public_control_url=CONTROL, public_edge_url=EDGE)


@pytest.fixture
async def served(public: Settings) -> AsyncIterator[tuple[AsyncTestClient, Litestar]]:
    app = create_app(public)
    async with AsyncTestClient(app=app) as client:
        yield client, app


def _sections(text: str) -> dict[str, list[str]]:
    """H2 title → its lines; the text before the first H2 under ""."""
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:]
            sections[current] = []
        else:
            sections[current].append(line)
    return sections


def _served_routes(app: Litestar) -> set[tuple[str, str]]:
    """Every documented (method, path) of the live route table."""
    return {
        (method, route.path_format)
        for route in app.routes
        if isinstance(route, HTTPRoute)
        for handler in route.route_handlers
        if handler.include_in_schema is not False and not route.path_format.startswith("/schema")
        for method in handler.http_methods
        if method not in ("OPTIONS", "HEAD")
    }


async def test_the_llmstxt_format_about_this_instance(served: tuple[AsyncTestClient, Litestar]) -> None:
    client, _ = served
    resp = await client.get("/llms.txt")  # no key
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/markdown")
    text = resp.text
    lines = text.splitlines()
    assert lines[0] == "# hookyard"
    assert lines[1] == ""
    assert lines[2].startswith("> ")
    assert CONTROL in lines[2]
    assert EDGE in lines[2]
    assert [line for line in lines if line.startswith("# ")] == ["# hookyard"]
    sections = _sections(text)
    assert list(sections) == ["", "Docs", "API routes", "MCP tools", "Optional"]
    assert not [line for line in lines if line.startswith("###")], "details have no headings (llmstxt.org)"
    for title in list(sections)[1:]:
        entries = [line for line in sections[title] if line]
        assert entries, title
        for line in entries:
            found = LINK_LINE.match(line)
            assert found, f"{title}: not a link list item: {line!r}"
            assert found["url"].startswith(CONTROL + "/"), line
    assert f"**Providers** ({len(CATALOG)}): `identity` (svix, clerk)" in text  # every catalog provider by name
    for phrase in ("`slack`", "`meta`", "handshake: true"):
        assert phrase in text, phrase
    for phrase in ("Authorization: Bearer", "signature_failure_reason", "resign_with", "Long poll", "204"):
        assert phrase in sections[""][0] or phrase in text, phrase
    assert "127.0.0.1" not in text, "only the public URLs of this instance"
    assert (await client.get("/llms.txt")).text == text


async def test_every_route_and_every_tool_is_listed(served: tuple[AsyncTestClient, Litestar]) -> None:
    client, app = served
    text = (await client.get("/llms.txt")).text
    sections = _sections(text)
    route_lines = [line for line in sections["API routes"] if line]
    listed = {tuple(LINK_LINE.match(line)["name"].split(" ", 1)) for line in route_lines}
    assert listed == _served_routes(app)
    assert len(route_lines) == len(listed)
    assert ("POST", "/api/start") in listed, "the provisioning routes of this instance"
    tools = [tool.name for tool in app.state.mcp.tools]
    tool_lines = [line for line in sections["MCP tools"] if line]
    assert [LINK_LINE.match(line)["name"] for line in tool_lines] == tools
    for method, path in app.state.mcp.routes.values():
        line = next(line for line in route_lines if line.startswith(f"- [{method} {path}]("))
        assert "(MCP: `" in line, line
    assert "(MCP: `send_test_webhook`)" in text  # its /v1 route, which hookyard trigger calls


async def test_a_route_added_to_the_app_is_listed(public: Settings) -> None:
    """Generated from the live route table: nothing to update by hand when a route comes."""
    app = create_app(public)

    @get("/api/ping", operation_id="Ping", sync_to_thread=False)
    def ping() -> dict[str, Any]:
        """Answers pong. Nothing else."""
        return {"pong": True}

    app.register(ping)
    async with AsyncTestClient(app=app) as client:
        text = (await client.get("/llms.txt")).text
    assert f"- [GET /api/ping]({CONTROL}/schema/openapi.json#/paths/~1api~1ping/get): Answers pong\n" in text


async def test_mcp_client_configurations_are_ready_to_paste(served: tuple[AsyncTestClient, Litestar]) -> None:
    client, _ = served
    text = (await client.get("/llms.txt")).text
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", text, flags=re.DOTALL)]
    assert len(blocks) == 3
    generic, vscode, bridge = blocks
    assert generic["mcpServers"]["hookyard"]["url"] == f"{CONTROL}/mcp"
    assert generic["mcpServers"]["hookyard"]["headers"]["Authorization"].startswith("Bearer ")
    assert vscode["servers"]["hookyard"] == {**vscode["servers"]["hookyard"], "type": "http", "url": f"{CONTROL}/mcp"}
    assert f"{CONTROL}/mcp" in bridge["mcpServers"]["hookyard"]["args"]
    assert f"claude mcp add --transport http hookyard {CONTROL}/mcp --header" in text
    assert "api_token" in text


async def test_worked_examples_use_this_instance(served: tuple[AsyncTestClient, Litestar]) -> None:
    client, _ = served
    text = (await client.get("/llms.txt")).text
    shell = "\n".join(re.findall(r"```sh\n(.*?)\n```", text, flags=re.DOTALL))
    assert f"curl -s -X POST {CONTROL}/api/start" in shell
    assert f"curl -s -X POST {CONTROL}/v1/endpoints " in shell
    assert f"{CONTROL}/v1/endpoints/$ENDPOINT_ID/events/wait?timeout=30" in shell
    assert f"{CONTROL}/v1/events/$EVENT_ID/replay" in shell
    assert f"`{EDGE}/h/<token>`" in text


def test_getting_started_says_only_what_this_instance_has() -> None:
    without = _getting_started(CONTROL, set())
    assert "/api/start" not in without
    assert "/api/register" not in without
    assert "hookyard account create" in without
    with_start = _getting_started(CONTROL, {("POST", "/api/start"), ("POST", "/api/register")})
    assert f"`POST {CONTROL}/api/start`" in with_start
    assert f"`POST {CONTROL}/api/register`" in with_start
