"""Under ``HOOKYARD_EGRESS=public`` the outbound paths cannot map the internal network.

A loopback name, an IPv6 loopback literal, a private IP literal, a name that does not resolve (``.invalid``
is reserved for that) and the cloud metadata address, each tried every way an account can send: a replay
over /v1, a replay over MCP with a temporary token, a destination test over both, and a rule delivery
through the deliver worker. Every answer and every stored record says the same words, with no address in
them, and every refusal is equally final (one attempt); the server log keeps the detail for operators,
without the URL's path or query. A literal or ``localhost`` is refused earlier, when written (saying why:
tests/security/test_egress_at_write.py), so here it is stored as a destination made before that check was.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx
import msgspec
import pytest
from litestar.testing import AsyncTestClient

from control.db.context import Context
from control.delivery.egress import REFUSED
from control.support.internal_addresses import written_refusal
from shared.settings import Settings
from tests.conftest import Account
from tests.destination import (
    FAST_DELIVERY,
    Destination,
    add_destination,
    deliveries_of,
    make_task,
    running,
    settled,
)
from tests.events_support import Ev, store
from tests.helpers import create_endpoint, db
from tests.mcp_client import posted_call

QUERY = "?access_token=Q-3vx81k"
ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|\[?[0-9a-f]*::[0-9a-f:]*\]?", re.IGNORECASE)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, egress="public", **FAST_DELIVERY)


def targets(port: int) -> dict[str, str]:
    """What each one is, by URL; the host as the refusal's log line names it."""
    return {
        f"http://localhost:{port}/hook{QUERY}": f"localhost:{port}",
        f"http://[::1]:{port}/hook{QUERY}": f"[::1]:{port}",
        f"http://10.20.30.40/hook{QUERY}": "10.20.30.40:80",
        f"http://internal-db.invalid/hook{QUERY}": "internal-db.invalid:80",
        f"http://169.254.169.254/latest/meta-data/{QUERY}": "169.254.169.254:80",
    }


async def _mcp(client: AsyncTestClient, token: str, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await posted_call(client, token, tool, **arguments)
    assert result.get("isError") is not True, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


async def test_every_refusal_reads_the_same_and_names_no_address(
    settings: Settings,
    ctx: Context,
    client: AsyncTestClient,
    account: Account,
    destination: Destination,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    urls = targets(destination.port)
    endpoint = (await create_endpoint(client, account.headers))["id"]
    started = await client.post("/api/start")
    assert started.status_code == 200, started.text
    temporary, token = started.json()["endpoint_id"], started.json()["api_token"]
    client.cookies.clear()  # the agent holds the token only
    ours, theirs = Ev(endpoint_id=endpoint), Ev(endpoint_id=temporary)
    async with db(settings.database_url) as conn:
        await store(conn, None, None, [ours, theirs])
        on_temporary = {url: await add_destination(conn, temporary, url) for url in urls}

    # A host internal as written (a literal, localhost) is refused when written, saying why: it reveals
    # nothing the caller did not write (tests/security/test_egress_at_write.py). Such a destination stored
    # before that check, and a name, are refused when sent, in the words below.
    written = {url for url in urls if written_refusal(httpx.URL(url).host) is not None}
    assert len(written) == len(urls) - 1
    answers: dict[str, list[dict[str, Any]]] = {url: [] for url in urls}
    for url in urls:
        replayed = await client.post(f"/v1/events/{ours.id}/replay", json={"url": url}, headers=account.headers)
        made = await client.post(f"/v1/endpoints/{endpoint}/destinations", json={"url": url}, headers=account.headers)
        if url in written:
            assert (replayed.status_code, made.status_code) == (400, 400), (replayed.text, made.text)
            async with db(settings.database_url) as conn:
                destination_id = await add_destination(conn, endpoint, url)
        else:
            assert (replayed.status_code, made.status_code) == (200, 201), (replayed.text, made.text)
            answers[url].append(replayed.json())
            answers[url].append(await _mcp(client, token, "replay_event", event_id=theirs.id, url=url))
            destination_id = made.json()["id"]
        tested = await client.post(f"/v1/destinations/{destination_id}/test", headers=account.headers)
        assert tested.status_code == 200, tested.text
        answers[url].append(tested.json())
        answers[url].append(await _mcp(client, token, "test_destination", destination_id=on_temporary[url]))
    sends = {url: len(outcomes) for url, outcomes in answers.items()}  # each recorded, then one rule delivery

    tasks = {url: await make_task(ctx, url) for url in urls}
    async with running(ctx):
        finished = {url: await settled(ctx, made["task"], "failed") for url, made in tasks.items()}

    texts: list[str] = []
    for url, outcomes in answers.items():
        for outcome in outcomes:
            assert (outcome["success"], outcome["status"]) == (False, None), outcome
            texts.append(outcome["error"])
            if "[" not in url and not ADDRESS.search(url):  # a name: what it resolved to appears nowhere
                assert not ADDRESS.search(json.dumps(outcome)), outcome
    for url, task in finished.items():
        assert task["attempts"] == 1, (url, task)  # as final for a name that does not resolve as for the rest
        texts.append(task["last_error"])
        texts += [row["error"] for row in await deliveries_of(ctx, tasks[url]["event"])]
    listed = await client.get(f"/v1/endpoints/{endpoint}/deliveries?limit=100", headers=account.headers)
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["deliveries"]) == sum(sends.values()) // 2
    texts += [d["error"] for d in listed.json()["deliveries"]]
    seen_by_token = await _mcp(client, token, "list_deliveries", endpoint_id=temporary, limit=100)
    assert len(seen_by_token["deliveries"]) == sum(sends.values()) // 2
    texts += [d["error"] for d in seen_by_token["deliveries"]]
    assert len(texts) == 2 * sum(sends.values()) + 2 * len(urls)  # answers, listed, temporary; task, its record
    assert set(texts) == {REFUSED}
    assert not ADDRESS.search(REFUSED)
    assert destination.requests == []

    # The operator's side: one server log line per refusal, with the host and why, never the path or query.
    refusals = [r.getMessage() for r in caplog.records if r.name == "hookyard.control.egress"]
    assert len(refusals) == sum(sends.values()) + len(urls)
    for url, host in urls.items():
        assert sum(line.startswith(f"egress refused: {host} ") for line in refusals) == sends[url] + 1, host
    assert any("does not resolve" in line for line in refusals)
    assert any("is a cloud metadata address" in line for line in refusals)
    for record in caplog.records:
        assert "access_token" not in record.getMessage()
        assert "/hook" not in record.getMessage()
