"""The flows /llms.txt teaches, followed as an agent follows them, against one live
``hookyard up`` on ports of its own (``upinstance``).

The worked example: every shell step of this instance's /llms.txt, in order, run by bash as written, each
``$VARIABLE`` taken from what an earlier step answered (the text says which: the endpoint's ``id`` and
``ingest_url``, the ``cursor``, the event's id); the example's replay target is the test's app. Then the
first MCP session it describes, through the official MCP client configured from the document's own client
configuration block, with the ``api_token`` of /api/start: ``send_test_webhook`` → ``wait_for_event`` with
``after`` → ``replay_event``; the ``inbox_url`` opening for a browser that never called /api/start; and
``/api/register`` keeping the token's endpoint.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Servers
from tests.helpers import module_database_url
from tests.onboarding.docshape import commands, fenced_blocks
from tests.onboarding.upinstance import Instance, running_up

pytestmark = pytest.mark.slow

database_url = module_database_url

EXAMPLE_TARGET = "https://example.com/webhooks"
VARIABLE = re.compile(r"\$([A-Z_]+)")


@pytest.fixture(scope="module")
def instance(servers: Servers, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    with running_up(servers, database_url, tmp_path_factory.mktemp("llms")) as running:
        yield running


@pytest.fixture(scope="module")
def llms_txt(instance: Instance) -> str:
    resp = httpx.get(f"{instance.control_url}/llms.txt", timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.text


def _learn(answer: dict[str, Any], known: dict[str, str]) -> None:
    """What a step's answer gives the later steps, as the text names it."""
    if isinstance(answer.get("id"), str) and answer["id"].startswith("ep_"):
        known["ENDPOINT_ID"] = answer["id"]
    if "ingest_url" in answer:
        known["INGEST_URL"] = answer["ingest_url"]
    if answer.get("cursor"):
        known["CURSOR"] = answer["cursor"]
    if answer.get("event_id"):
        known["EVENT_ID"] = answer["event_id"]
    if answer.get("ok") is True:  # the ingest URL's acknowledgement
        known["EVENT_ID"] = answer["id"]


def test_the_worked_example_runs_as_written(instance: Instance, llms_txt: str) -> None:
    steps = [command for start, lines in fenced_blocks(llms_txt) for command in commands(lines, start)]
    runnable = [step for step in steps if not step.text.startswith("claude ")]  # a client's own CLI
    assert len(steps) - len(runnable) == 1
    known = {"HOOKYARD_API_KEY": instance.key}
    answers: list[tuple[str, dict[str, Any]]] = []
    for step in runnable:
        text = step.text.replace(EXAMPLE_TARGET, f"http://127.0.0.1:{instance.app.port}/webhooks")
        missing = set(VARIABLE.findall(text)) - set(known)
        assert not missing, f"line {step.line} uses {missing} before a step answered them: {text}"
        done = subprocess.run(
            ["bash", "-c", text], env={**instance.env, **known}, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{text}\n{done.stderr}"
        answer = json.loads(done.stdout)
        assert answer.get("error") is None, f"{text}\n{done.stdout}"
        if "event" in answer:  # a wait answers the event the step before made
            assert answer["event"]["id"] == known["EVENT_ID"], (text, answer)
        _learn(answer, known)
        answers.append((text, answer))

    taught = [next(k for k in ("api/start", "test-webhook", "events/wait", "INGEST_URL", "replay", "v1/endpoints")
                   if k in text) for text, _ in answers]  # fmt: skip
    assert taught == ["api/start", "v1/endpoints", "test-webhook", "events/wait", "INGEST_URL", "events/wait", "replay"]
    ingested, replayed = answers[4][1], answers[-1][1]
    waited = answers[5][1]["event"]
    sent = '{"type": "order.created", "id": "ord_1"}'  # the provider's request of the example
    assert (waited["id"], waited["path"], waited["body"]) == (ingested["id"], "/", sent)
    assert (replayed["success"], replayed["status"]) == (True, 200), replayed
    assert instance.app.requests[-1].body == sent.encode()


def _configured_client(llms_txt: str, token: str) -> tuple[str, dict[str, str]]:
    """The MCP server's URL and headers from the document's first client configuration, token filled in."""
    generic = json.loads(re.findall(r"```json\n(.*?)\n```", llms_txt, flags=re.DOTALL)[0])
    server = generic["mcpServers"]["hookyard"]
    headers = {name: value.replace("<api_token or hy_live_ key>", token) for name, value in server["headers"].items()}
    return server["url"], headers


async def test_the_first_mcp_session_with_the_documented_configuration(instance: Instance, llms_txt: str) -> None:
    started = httpx.post(f"{instance.control_url}/api/start", timeout=10)
    assert started.status_code == 200, started.text
    token, endpoint_id = started.json()["api_token"], started.json()["endpoint_id"]
    url, headers = _configured_client(llms_txt, token)
    assert url == f"{instance.control_url}/mcp"

    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(70))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:

        async def ok(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, f"{tool}: {result.content}"
            return result.structured_content

        sent = await ok("send_test_webhook", endpoint_id=endpoint_id, provider="payments", event_type="invoice.paid")
        assert (sent["stored"], bool(sent["cursor"])) == (True, True), sent
        waited = await ok("wait_for_event", endpoint_id=endpoint_id, after=sent["cursor"], timeout=10)
        assert waited["event"]["id"] == sent["event_id"], waited
        target = f"http://127.0.0.1:{instance.app.port}/webhooks"
        replayed = await ok("replay_event", event_id=sent["event_id"], url=target)
        assert (replayed["success"], replayed["status"]) == (True, 200), replayed

    # inbox_url, handed to a human: opens in a browser that never called /api/start (no cookie)
    with httpx.Client(follow_redirects=True, timeout=10) as browser:
        page = browser.get(started.json()["inbox_url"], headers={"accept": "text/html"})
    assert page.status_code == 200, page.text[:500]
    assert page.headers["content-type"].startswith("text/html")
    assert endpoint_id in page.text

    # keeping it: the token's endpoint becomes the new account's, permanent
    email = f"agent-{uuid.uuid4().hex[:8]}@example.com"
    registered = httpx.post(
        f"{instance.control_url}/api/register", json={"email": email, "api_token": token}, timeout=10
    )
    assert registered.status_code in (200, 201), registered.text
    key = next(v for v in registered.json().values() if isinstance(v, str) and v.startswith("hy_live_"))
    kept = httpx.get(
        f"{instance.control_url}/v1/endpoints/{endpoint_id}", headers={"authorization": f"Bearer {key}"}, timeout=10
    )
    assert (kept.status_code, kept.json()["temporary"]) == (200, False), kept.text
