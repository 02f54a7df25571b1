"""Deliveries through real processes: edge → flush → deliver → destination, a deliver worker killed
mid-request (nothing lost: retried after the lease), and SIGTERM letting an in-flight request finish."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from control.db.context import Context
from shared.settings import Settings
from tests.conftest import make_account
from tests.destination import (
    Destination,
    Reply,
    deliveries_of,
    make_task,
    serving,
    settled,
    task_status,
)
from tests.helpers import db, wait_for
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_a_worker_killed_mid_request_loses_nothing(
    settings: Settings, ctx: Context, destination: Destination, tmp_path: Path
) -> None:
    destination.reply(Reply(delay_s=2.0))  # the first attempt is still in flight when the worker dies
    ids_ = await make_task(ctx, destination.url)
    stack = Stack(
        settings,
        tmp_path,
        HOOKYARD_DELIVER_LEASE_S="3",
        HOOKYARD_DELIVER_TIMEOUT_S="2.5",
        HOOKYARD_DELIVER_SWEEP_S="0.2",
        HOOKYARD_DELIVER_POLL_S="0.2",
    )
    try:
        stack.start_worker("w", "deliver")
        (first,) = await destination.wait_for(1, timeout=20)
        stack.kill("w", signal.SIGKILL)
        killed_at = time.time()
        stack.start_worker("w2", "deliver")
        _, second = await destination.wait_for(2, timeout=20)
        await settled(ctx, ids_["task"], "succeeded", timeout=20)
    finally:
        stack.stop_all()
    assert [r.headers["x-hookyard-delivery-attempt"] for r in (first, second)] == ["1", "2"]
    assert first.headers["x-hookyard-event-id"] == second.headers["x-hookyard-event-id"] == ids_["event"]
    # Retried once the lease (3 s from the claim) ran out, not before.
    assert second.at >= first.at + 2.5
    assert second.at > killed_at
    rows = await deliveries_of(ctx, ids_["event"])
    assert [(r["attempt_number"], r["success"]) for r in rows] == [(2, True)]  # attempt 1 died with its worker


async def test_end_to_end_edge_to_destination(stack: Stack, database_url: str, destination: Destination) -> None:
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush", "deliver")
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "e2e"})).json()
        created = await api.post(
            f"/v1/endpoints/{endpoint['id']}/destinations", json={"url": destination.url, "forward_all": True}
        )
        assert created.status_code == 201, created.text
        body = b'{"type":"payment_intent.succeeded","data":{"amount":2000}}'
        sent_at = time.time()
        async with httpx.AsyncClient() as provider:
            ack = await provider.post(
                endpoint["ingest_url"] + "/sub/path?x=1",
                content=body,
                headers={"content-type": "application/json", "x-custom": "kept"},
            )
        assert ack.status_code == 200, ack.text
        (got,) = await destination.wait_for(1)
        event_id = ack.json()["id"]
        assert got.body == body
        assert got.headers["x-custom"] == "kept"
        assert got.headers["x-hookyard-event-id"] == event_id
        assert got.at - sent_at < 5  # edge, flush, routing and delivery within seconds, on a loaded machine too

        async def recorded() -> Any:
            event = (await api.get(f"/v1/events/{event_id}")).json()
            return event["deliveries"] if event.get("deliveries") else None

        (delivery,) = await wait_for(recorded)
        assert (delivery["source"], delivery["success"], delivery["response_status"]) == ("rule", True, 200)
        assert delivery["destination_id"] == created.json()["id"]


async def test_sigterm_lets_in_flight_requests_finish(
    settings: Settings, ctx: Context, destination: Destination, tmp_path: Path
) -> None:
    destination.reply(Reply(delay_s=1.0))
    ids_ = await make_task(ctx, destination.url)
    stack = Stack(settings, tmp_path, HOOKYARD_DELIVER_DRAIN_S="10")
    try:
        stack.start_worker("w", "deliver")
        await destination.wait_for(1, timeout=20)
        stack.kill("w", signal.SIGTERM)  # returns once the process exited
    finally:
        stack.stop_all()
    row = await task_status(ctx, ids_["task"])
    assert (row["status"], row["attempts"]) == ("succeeded", 1)
    assert len(destination.requests) == 1
    assert [r["success"] for r in await deliveries_of(ctx, ids_["event"])] == [True]


async def test_nul_bodies_of_one_account_never_multiply_anyones_deliveries(
    settings: Settings, database_url: str, tmp_path: Path
) -> None:
    """Account B's 60 events carry NUL in their UTF-8 bodies (storable as events, once unstorable as
    delivery records, which failed every group commit they were in and had the whole batch sent again and
    again); account A's 3 normal events are sent among them. Each destination receives exactly one request
    per event, and every attempt has its delivery record with the exact body."""
    stack = Stack(
        settings,
        tmp_path,
        HOOKYARD_DELIVER_LEASE_S="3",
        HOOKYARD_DELIVER_TIMEOUT_S="2",
        HOOKYARD_DELIVER_SWEEP_S="0.2",
        HOOKYARD_DELIVER_POLL_S="0.2",
    )
    a, b = await make_account(database_url), await make_account(database_url)
    with serving() as to_a, serving() as to_b:
        try:
            stack.start_control()
            stack.start_edge()
            stack.start_worker("worker", "flush", "deliver")
            async with httpx.AsyncClient(base_url=stack.control_url) as api, httpx.AsyncClient() as provider:
                ingest = {}
                for account, destination in ((a, to_a), (b, to_b)):
                    endpoint = (await api.post("/v1/endpoints", json={"name": "nul"}, headers=account.headers)).json()
                    created = await api.post(
                        f"/v1/endpoints/{endpoint['id']}/destinations",
                        json={"url": destination.url, "forward_all": True},
                        headers=account.headers,
                    )
                    assert created.status_code == 201, created.text
                    ingest[account.id] = endpoint["ingest_url"]
                sends = [(b, b"event %d of B: \x00 NUL inside" % i, "text/plain; charset=utf-8") for i in range(60)]
                for i in range(3):  # among B's, so they share group commits with them
                    sends.insert(20 * i + 10, (a, b'{"event": %d, "of": "A"}' % i, "application/json"))
                acks = await asyncio.gather(
                    *(
                        provider.post(ingest[who.id], content=body, headers={"content-type": kind})
                        for who, body, kind in sends
                    )
                )
                assert [r.status_code for r in acks] == [200] * 63
                sent = {ack.json()["id"]: (who, body) for ack, (who, body, _) in zip(acks, sends, strict=True)}

                async def finished() -> bool:
                    async with db(database_url) as conn:
                        done = await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE status = 'succeeded'")
                    return done == 63

                await wait_for(finished, timeout=60)  # once succeeded a task is never sent again
                for who, destination, count in ((a, to_a, 3), (b, to_b, 60)):
                    received = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
                    assert received == Counter({e: 1 for e, (w, _) in sent.items() if w is who})
                    assert len(destination.requests) == count
                    assert {r.body for r in destination.requests} == {body for w, body in sent.values() if w is who}
                for event_id, (who, body) in sent.items():
                    event = (await api.get(f"/v1/events/{event_id}", headers=who.headers)).json()
                    (delivery,) = event["deliveries"]
                    assert (delivery["success"], delivery["attempt_number"]) == (True, 1)
                    assert (delivery["request_body"], delivery["request_body_encoding"]) == (body.decode(), "utf8")
        finally:
            stack.stop_all()
