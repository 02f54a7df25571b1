"""Deduplication by the provider's idempotency key through real processes: a signed webhook its provider
sent twice, and copies sent at once to two edge processes, reach a deduplicating destination once; the
copy's delivery record names the event it duplicates; a retry by hand and a replay always go."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.samples import sample
from shared.settings import Settings
from tests.destination import Destination, serving
from tests.helpers import create_endpoint, db, token_of, wait_for
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow

PROVIDER_SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ="


@pytest.fixture
def sink() -> Iterator[Destination]:
    with serving() as server:
        yield server


def _stack(settings: Settings, tmp_path: Path) -> Stack:
    return Stack(settings, tmp_path, HOOKYARD_DELIVER_SWEEP_S="0.2", HOOKYARD_DELIVER_POLL_S="0.2")


async def _deduplicating(client: Any, account: Any, sink: Destination) -> tuple[dict[str, Any], str]:
    endpoint = await create_endpoint(client, account.headers)
    created = await client.post(
        f"/v1/endpoints/{endpoint['id']}/destinations",
        json={"url": sink.url, "forward_all": True, "deduplicate_window_s": 3600},
        headers=account.headers,
    )
    assert created.status_code == 201, created.text
    return endpoint, created.json()["id"]


async def _settled(database_url: str, count: int) -> None:
    async def done() -> bool:
        async with db(database_url) as conn:
            finished = await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE status = 'succeeded'")
        return finished == count

    await wait_for(done, timeout=30, interval=0.05)


async def _deliveries(client: Any, account: Any, event_id: str) -> list[dict[str, Any]]:
    got = await client.get(f"/v1/events/{event_id}", headers=account.headers)
    assert got.status_code == 200, got.text
    return got.json()["deliveries"]


async def test_a_provider_retry_is_delivered_once_and_retries_by_hand_and_replays_always_go(
    settings: Settings, client: Any, account: Any, database_url: str, sink: Destination, tmp_path: Path
) -> None:
    stack = _stack(settings, tmp_path)
    try:
        stack.start_worker("worker", "flush", "deliver")
        stack.start_edge()
        endpoint, destination_id = await _deduplicating(client, account, sink)
        webhook = sample("payments", "payment_intent.succeeded", secret=PROVIDER_SECRET, seed=27)
        ingest = f"{stack.edge_url}/h/{token_of(endpoint['ingest_url'])}"
        async with httpx.AsyncClient() as provider:
            acks = [await provider.post(ingest, content=webhook.body, headers=webhook.headers) for _ in range(2)]
        assert [a.status_code for a in acks] == [200, 200]
        events = [a.json()["id"] for a in acks]
        await _settled(database_url, 2)
        (got,) = sink.requests
        original = got.headers["x-hookyard-event-id"]
        (copy,) = set(events) - {original}
        assert got.body == webhook.body
        (skipped,) = await _deliveries(client, account, copy)
        assert skipped["duplicate_of"] == original
        assert (skipped["success"], skipped["request_headers"], skipped["response_status"]) == (True, None, None)
        assert skipped["destination_id"] == destination_id
        (sent,) = await _deliveries(client, account, original)
        assert (sent["duplicate_of"], sent["response_status"]) == (None, 200)
        # The skip is recorded, not an attempt: the destination's health still shows the send, not a null
        # status at the skip's time (which read as a failure).
        got = await client.get(f"/v1/destinations/{destination_id}", headers=account.headers)
        health = got.json()["health"]
        assert (health["attempts"], health["last_status"]) == (1, 200), health
        assert health["last_attempt_at"] == sent["created_at"]

        retried = await client.post(f"/v1/deliveries/{skipped['id']}/retry", headers=account.headers)
        assert retried.status_code == 202, retried.text
        await sink.wait_for(2)
        replayed = await client.post(f"/v1/events/{original}/replay", json={"url": sink.url}, headers=account.headers)
        assert replayed.status_code == 200, replayed.text
        requests = await sink.wait_for(3)
    finally:
        stack.stop_all()
    assert [r.headers.get("x-hookyard-event-id") for r in requests[:2]] == [original, copy]
    assert requests[2].body == webhook.body  # the replay, verbatim
    (_, again) = await _deliveries(client, account, copy)
    assert (again["duplicate_of"], again["response_status"], again["attempt_number"]) == (None, 200, 2)


async def test_copies_sent_at_once_to_two_edges_reach_the_destination_once(
    settings: Settings, client: Any, account: Any, database_url: str, sink: Destination, tmp_path: Path
) -> None:
    stack = _stack(settings, tmp_path)
    try:
        stack.start_worker("w1", "flush", "deliver")
        stack.start_worker("w2", "deliver")
        edges = [stack.start_edge(), stack.start_edge("edge2", port=free_port())]
        endpoint, _ = await _deduplicating(client, account, sink)
        token = token_of(endpoint["ingest_url"])
        webhooks = [sample("payments", "invoice.paid", secret=PROVIDER_SECRET, seed=seed) for seed in range(10)]
        async with httpx.AsyncClient() as provider:
            acks = await asyncio.gather(
                *(
                    provider.post(f"{edge}/h/{token}", content=webhook.body, headers=webhook.headers)
                    for webhook in webhooks
                    for edge in edges
                )
            )
        assert [a.status_code for a in acks] == [200] * 20
        await _settled(database_url, 20)
    finally:
        stack.stop_all()
    assert Counter(r.body for r in sink.requests) == Counter({w.body: 1 for w in webhooks})
    sent = {r.headers["x-hookyard-event-id"] for r in sink.requests}
    copies = [a.json()["id"] for a in acks if a.json()["id"] not in sent]
    assert len(copies) == 10
    for copy in copies:
        (skipped,) = await _deliveries(client, account, copy)
        assert skipped["duplicate_of"] in sent
