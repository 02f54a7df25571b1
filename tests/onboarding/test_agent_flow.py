"""The flow /llms.txt and the README teach an agent, as written: ``send_test_webhook`` then ``wait_for_event``.

The send answers once its sample is stored, with a ``cursor``; the wait with ``after`` set to it answers that
very sample at once, and its own ``cursor`` leads to the next event. Run with the official MCP client over
Streamable HTTP and over /v1, against real processes (a control plane, an edge, a worker); the same stack's
control log is then read for the SDK's per-request ``Terminating session: None`` line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from shared.settings import Settings, load_settings
from tests.conftest import Account, Servers, forget_prefix
from tests.helpers import module_database_url
from tests.stack import Stack

pytestmark = pytest.mark.slow

database_url = module_database_url  # one database for the module: every test uses accounts of its own

WAIT_S = 10
"""The wait's timeout: an answer well within it is the sample found at once, not a wait that ran out."""


@pytest.fixture(scope="module")
def module_settings(servers: Servers, database_url: str) -> Iterator[Settings]:
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    yield load_settings({}, database_url=database_url, redis_url=servers.redis_url, redis_prefix=prefix)

    asyncio.run(forget_prefix(servers.redis_url, prefix))


class Tools:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def ok(self, tool: str, /, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert not result.is_error, f"{tool}: {result.content}"
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    async def error(self, tool: str, /, **arguments: Any) -> dict[str, str]:
        result = await self.client.call_tool(tool, arguments)
        assert result.is_error, f"{tool} succeeded: {result.structured_content}"
        return json.loads(result.content[0].text)["error"]


@contextlib.asynccontextmanager
async def connected(stack: Stack, key: str, mode: str = "auto") -> AsyncIterator[Tools]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(70))
    transport = streamable_http_client(f"{stack.control_url}/mcp", http_client=http)
    async with http, Client(transport, mode=mode) as client:
        yield Tools(client)


async def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    answer = await call
    return answer, time.monotonic() - started


async def test_send_then_wait_answers_the_sample_over_mcp(shared_stack: Stack, account: Account) -> None:
    """The documented order, nothing started before the send: the wait answers the sample, at once."""
    async with connected(shared_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="agent"))["id"]
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="payments", event_type="invoice.paid")
        assert (sent["accepted"], sent["stored"]) == (True, True), sent
        assert sent["cursor"]
        # Stored before the answer: reading it right away finds it.
        assert (await t.ok("get_event", event_id=sent["event_id"]))["event_type"] == "invoice.paid"

        waited, took = await _timed(t.ok("wait_for_event", endpoint_id=ep, after=sent["cursor"], timeout=WAIT_S))
        assert waited["timed_out"] is False, waited
        assert waited["event"]["id"] == sent["event_id"]
        assert took < WAIT_S / 2, f"the sample was answered only after {took:.1f} s"

        # The answer's cursor leads past the sample: the next wait answers the next event, not the sample again.
        quiet = await t.ok("wait_for_event", endpoint_id=ep, after=waited["cursor"], timeout=1)
        assert (quiet["event"], quiet["timed_out"]) == (None, True)
        again = await t.ok("send_test_webhook", endpoint_id=ep, provider="code_host", event_type="push")
        following = await t.ok("wait_for_event", endpoint_id=ep, after=quiet["cursor"], timeout=WAIT_S)
        assert following["event"]["id"] == again["event_id"]


async def test_the_cursor_skips_nothing_the_filters_ask_for(shared_stack: Stack, account: Account) -> None:
    """The cursor is a position, not the event: a wait with filters from it answers the first match at or
    after the sample, whichever that is."""
    async with connected(shared_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="filtered"))["id"]
        first = await t.ok("send_test_webhook", endpoint_id=ep, provider="payments", event_type="invoice.paid")
        second = await t.ok("send_test_webhook", endpoint_id=ep, provider="payments", event_type="charge.refunded")
        refund = await t.ok(
            "wait_for_event", endpoint_id=ep, after=first["cursor"], type="charge.refunded", timeout=WAIT_S
        )
        assert refund["event"]["id"] == second["event_id"]
        both = await t.ok("wait_for_event", endpoint_id=ep, after=first["cursor"], timeout=WAIT_S)
        assert both["event"]["id"] == first["event_id"]


async def test_the_flow_with_a_temporary_token_from_api_start(shared_stack: Stack) -> None:
    """What an agent does with no account: /api/start's token and endpoint, then send and wait."""
    started = httpx.post(f"{shared_stack.control_url}/api/start", json={}, timeout=10)
    assert started.status_code == 200, started.text
    token, ep = started.json()["api_token"], started.json()["endpoint_id"]
    async with connected(shared_stack, token) as t:
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="identity", event_type="user.created")
        waited = await t.ok("wait_for_event", endpoint_id=ep, after=sent["cursor"], timeout=WAIT_S)
        assert waited["event"]["id"] == sent["event_id"]


async def test_send_then_wait_over_v1(shared_stack: Stack, account: Account) -> None:
    async with httpx.AsyncClient(base_url=shared_stack.control_url, headers=account.headers, timeout=30) as api:
        ep = (await api.post("/v1/endpoints", json={"name": "v1"})).json()["id"]
        resp = await api.post(
            f"/v1/endpoints/{ep}/test-webhook", json={"provider": "commerce", "event_type": "orders/paid"}
        )
        assert resp.status_code == 200, resp.text
        sent = resp.json()
        assert (sent["accepted"], sent["stored"]) == (True, True), sent
        assert (await api.get(f"/v1/events/{sent['event_id']}")).status_code == 200

        (resp, took) = await _timed(
            api.get(f"/v1/endpoints/{ep}/events/wait", params={"after": sent["cursor"], "timeout": WAIT_S})
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["event"]["id"] == sent["event_id"]
        assert resp.headers["hookyard-cursor"] == resp.json()["cursor"]
        assert took < WAIT_S / 2
        after = await api.get(f"/v1/endpoints/{ep}/events/wait", params={"after": resp.json()["cursor"], "timeout": 1})
        assert after.status_code == 204


def _run(command: str, **env: str) -> dict[str, Any]:
    done = subprocess.run(
        ["bash", "-c", command], env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=40
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_the_llms_txt_steps_run_as_written(shared_stack: Stack, account: Account) -> None:
    """The worked example's send and wait steps, copied from this instance's /llms.txt and run by a shell."""
    text = httpx.get(f"{shared_stack.control_url}/llms.txt", timeout=10).text
    blocks = re.findall(r"```sh\n(.*?)\n```", text, flags=re.DOTALL)
    (send,) = [block for block in blocks if "/test-webhook" in block]
    wait, again = [block for block in blocks if "/events/wait" in block]  # after the sample, after the request
    assert wait == again
    assert "after=$CURSOR" in wait
    created = httpx.post(f"{shared_stack.control_url}/v1/endpoints", json={"name": "llms"}, headers=account.headers)
    ep = created.json()["id"]
    sent = await asyncio.to_thread(_run, send, HOOKYARD_API_KEY=account.key, ENDPOINT_ID=ep)
    assert sent["stored"] is True, sent
    waited = await asyncio.to_thread(_run, wait, HOOKYARD_API_KEY=account.key, ENDPOINT_ID=ep, CURSOR=sent["cursor"])
    assert waited["event"]["id"] == sent["event_id"]
    assert waited["cursor"]


async def test_a_refused_sample_has_no_cursor(shared_stack: Stack, account: Account) -> None:
    async with connected(shared_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="locked"))["id"]
        await t.ok("add_allowlist_entry", endpoint_id=ep, cidr="192.0.2.0/24")
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="payments", event_type="invoice.paid")
        assert (sent["status"], sent["accepted"], sent["stored"], sent["cursor"]) == (403, False, False, None)


async def test_no_terminating_session_line_per_mcp_request(shared_stack: Stack, account: Account) -> None:
    """Stateless /mcp makes a transport per request of the handshake protocol (what most clients speak, the
    official client's ``legacy`` mode); the SDK's INFO line for ending each must not reach the log. Calls in
    both modes, then what the control plane logged meanwhile is read."""
    log = shared_stack.log_dir / "control.log"
    before = log.stat().st_size
    for mode in ("legacy", "auto"):
        async with connected(shared_stack, account.key, mode) as t:
            await t.ok("create_endpoint", name=f"calls-{mode}")
            for _ in range(3):
                await t.ok("list_endpoints")
            assert (await t.error("get_endpoint", endpoint_id="ep_nope"))["code"] == "not_found"
    whole = log.read_bytes()
    # The SDK's other INFO lines still reach the log: only the one logger is quieted, and the log is read.
    assert b"INFO mcp.server.streamable_http_manager: StreamableHTTP session manager started" in whole
    assert b"Terminating session" not in whole[before:]
