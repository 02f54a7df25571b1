"""The transform tools through the official MCP client over Streamable HTTP, against a real control process:
a dry run, a destination's transform set (and refused with the line of its syntax error), and a replay
through a transform to a real destination."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from shared.settings import Settings, load_settings
from tests.conftest import Account, Servers
from tests.destination import Destination, serving
from tests.events_support import Ev, store
from tests.helpers import db, module_database_url
from tests.mcp_client import call
from tests.stack import Stack

pytestmark = pytest.mark.slow
database_url = module_database_url

INVOICES_ONLY = """function handler(request, context) {
  if (!String(request.body.type).startsWith("invoice.")) return null;
  request.headers["x-billing-team"] = "yes";
  return request;
}"""


@pytest.fixture(scope="module")
def module_settings(servers: Servers, database_url: str) -> Settings:
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    return load_settings({}, database_url=database_url, redis_url=servers.redis_url, redis_prefix=prefix, egress="any")


@pytest.fixture(scope="module")
def sink() -> Iterator[Destination]:
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def control(module_settings: Settings, sink: Destination, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(module_settings, tmp_path_factory.mktemp("transform-mcp"))
    try:
        port = stack.control_port
        stack.start("control", "control", "--port", str(port), port=port)
        yield stack
    finally:
        stack.stop_all()


@contextlib.asynccontextmanager
async def tools(stack: Stack, key: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30))
    async with http, Client(streamable_http_client(f"{stack.control_url}/mcp", http_client=http)) as client:
        yield client


async def test_transform_tools_over_streamable_http(
    control: Stack, account: Account, database_url: str, sink: Destination
) -> None:
    async with tools(control, account.key) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"test_transformation", "update_destination_transform"} <= set(listed)
        assert "transform" in listed["test_transformation"].input_schema["properties"]

        failed, endpoint = await call(client, "create_endpoint", name="billing")
        assert not failed
        failed, destination = await call(client, "create_destination", endpoint_id=endpoint["id"], url=sink.url)
        assert not failed

        failed, refused = await call(
            client, "update_destination_transform", destination_id=destination["id"], transform="function handler( {"
        )
        assert failed
        assert refused["error"]["code"] == "validation_error"
        assert refused["error"]["message"].startswith("transform: line 1: SyntaxError")

        failed, updated = await call(
            client, "update_destination_transform", destination_id=destination["id"], transform=INVOICES_ONLY
        )
        assert not failed
        assert updated["transform"] == INVOICES_ONLY

        request = {"method": "POST", "path": "/", "headers": {"content-type": "application/json"}}
        failed, skipped = await call(
            client,
            "test_transformation",
            transform=INVOICES_ONLY,
            request={**request, "body": {"type": "customer.created"}},
        )
        assert (failed, skipped["skipped"], skipped["request"]) == (False, True, None)
        failed, kept = await call(
            client,
            "test_transformation",
            transform=INVOICES_ONLY,
            request={**request, "body": {"type": "invoice.paid"}},
        )
        assert kept["request"]["headers"]["x-billing-team"] == "yes"

        ev = Ev(endpoint_id=endpoint["id"], body=b'{"type":"invoice.paid","id":"in_1"}')
        async with db(database_url) as conn:
            await store(conn, None, None, [ev])
        before = len(sink.requests)
        failed, replayed = await call(
            client, "replay_event", event_id=ev.id, url=sink.url, transform=INVOICES_ONLY, resign_with="s" * 32
        )
        assert not failed
        assert (replayed["success"], replayed["transform"]["outcome"]) == (True, "applied")
        got = (await sink.wait_for(before + 1))[-1]
        assert got.headers["x-billing-team"] == "yes"

        failed, removed = await call(
            client, "update_destination_transform", destination_id=destination["id"], transform=None
        )
        assert (failed, removed["transform"]) == (False, None)


async def test_a_dry_run_returning_a_request_past_the_depth_cap_names_the_limit(
    control: Stack, account: Account
) -> None:
    """20,000 levels returned as the body: a failed run naming the cap, not an ended sandbox process."""
    deep = "function handler(r) { let o = {}; for (let i = 0; i < 20000; i++) o = { a: o }; r.body = o; return r; }"
    request = {"method": "POST", "path": "/", "headers": {"content-type": "application/json"}, "body": {"a": 1}}
    async with tools(control, account.key) as client:
        failed, result = await call(client, "test_transformation", transform=deep, request=request)
    assert not failed, result
    assert result["request"] is None
    assert result["error"] == {
        "message": "a field of the returned request nests deeper than 128 levels (the limit on JSON depth)",
        "line": None,
    }


async def test_the_attacks_of_issue_42_leave_a_real_control_process_up(
    control: Stack, account: Account, other_account: Account
) -> None:
    """The V8 fatal error and the builtin that ignores termination, over MCP, against a control process of
    its own: it stays up, and another account's requests are answered at once meanwhile."""
    split = 'function handler(r){ "x".repeat(2**29-25).split(""); return null; }'
    fill = "function handler(r){ new Array(1e8).fill(1.5); return null; }"
    request = {"method": "POST", "path": "/", "body": {"a": 1}}
    async with (
        tools(control, account.key) as client,
        httpx2.AsyncClient(
            base_url=control.control_url, headers={"Authorization": f"Bearer {other_account.key}"}
        ) as other,
    ):
        # Warmed first: the other account's first request opens its connection and reads its key, which on a
        # loaded machine alone took 1.9 s once; what is measured below is what the attack costs it.
        assert (await other.get("/v1/endpoints")).status_code == 200
        for attack, said in ((split, "stopped: "), (fill, "stopped: still")):  # the split may be killed first
            running = asyncio.create_task(call(client, "test_transformation", transform=attack, request=request))
            waits = []
            while not running.done():
                started = time.monotonic()
                assert (await other.get("/v1/endpoints")).status_code == 200
                waits.append(time.monotonic() - started)
                await asyncio.sleep(0.05)
            failed, answer = await running
            assert not failed
            assert answer["error"]["message"].startswith(said), answer
            # 43 s before. The child filling its memory limit beside a loaded 2-core machine (the suite's other
            # workers) held one request 1.3 s once: the kernel's work, not the event loop's, so the bound is 3 s.
            assert max(waits) < 3.0, waits
        assert (await other.get("/healthz")).status_code == 200
        failed, fine = await call(
            client, "test_transformation", transform="function handler(r) { return r; }", request=request
        )
        assert (failed, fine["error"]) == (False, None)
