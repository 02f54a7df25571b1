"""The deliver worker against real loopback destinations: forwarding, retries, Retry-After, the circuit,
egress, draining, lease recovery (in process), and a worker process killed mid-request."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from control.db import tasks as db_tasks
from control.delivery import egress
from control.delivery.send import send
from control.service import Context
from control.workers import worker_context
from control.workers.deliver import Deliver
from control.workers.loop import run_loops
from shared import ids
from shared.settings import Settings
from tests.conftest import make_account
from tests.destination import Destination, Reply, add_destination, add_endpoint, add_rule, serving
from tests.events_support import Ev, store
from tests.helpers import wait_for
from tests.stack import Stack

FAST = {
    "retry_schedule_s": (0.05, 0.05),
    "deliver_poll_s": 0.2,
    "deliver_sweep_s": 0.2,
    "deliver_timeout_s": 2.0,
    "deliver_lease_s": 5.0,
}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST)


@pytest.fixture
def destination() -> Iterator[Destination]:
    with serving() as server:
        yield server


@contextlib.asynccontextmanager
async def running(ctx: Context) -> AsyncIterator[Deliver]:
    """The deliver loop in this event loop until the block ends; then stopped and drained like on SIGTERM."""
    deliver = Deliver(ctx)
    stop = asyncio.Event()
    loop = asyncio.create_task(run_loops([deliver], stop))
    try:
        yield deliver
    finally:
        stop.set()
        await loop
        await deliver.close()


async def _task(
    ctx: Context,
    url: str,
    *,
    endpoint_id: str | None = None,
    destination_id: str | None = None,
    dest_headers: dict[str, str] | None = None,
    **event: Any,
) -> dict[str, str]:
    """An event with one pending delivery task to ``url`` (ids by name)."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = endpoint_id or await add_endpoint(conn)
        destination_id = destination_id or await add_destination(conn, endpoint_id, url, headers=dest_headers)
        rule_id = await add_rule(conn, endpoint_id, [destination_id])
        ev = Ev(endpoint_id=endpoint_id, **event)
        await store(conn, None, None, [ev])
        task_id = ids.new_id("task")
        await db_tasks.insert_tasks(conn, [(task_id, endpoint_id, ev.id, ev.received_at, rule_id, destination_id)])
    return {"endpoint": endpoint_id, "destination": destination_id, "rule": rule_id, "event": ev.id, "task": task_id}


async def _row(ctx: Context, sql: str, *args: object) -> Any:
    async with ctx.pool.acquire() as conn:
        return await conn.fetchrow(sql, *args)


async def _task_status(ctx: Context, task_id: str) -> Any:
    return await _row(ctx, "SELECT status, attempts, last_error FROM delivery_tasks WHERE id = $1", task_id)


async def _settled(ctx: Context, task_id: str, status: str, timeout: float = 10) -> Any:
    async def check() -> Any:
        row = await _task_status(ctx, task_id)
        return row if row["status"] == status else None

    return await wait_for(check, timeout=timeout)


async def _deliveries(ctx: Context, event_id: str) -> list[Any]:
    async with ctx.pool.acquire() as conn:
        return await conn.fetch(
            "SELECT * FROM deliveries WHERE event_id = $1 ORDER BY attempt_number, created_at", event_id
        )


async def test_forwards_verbatim_with_destination_headers_on_top(ctx: Context, destination: Destination) -> None:
    captured = {
        "content-type": "application/json; charset=utf-8",
        "stripe-signature": "t=1795252711,v1=" + "a" * 64,
        "x-custom": "from-provider",
        "x-kept": "ünïcode",
        "host": "hooks.example.com",
        "content-length": "27",
        "connection": "keep-alive, x-hop",
        "x-hop": "connection-scoped",
        "transfer-encoding": "chunked",
    }
    body = b'{"id":"evt_1","amount":2000}'
    ids_ = await _task(
        ctx,
        destination.url,
        dest_headers={"authorization": "Bearer dst-secret", "x-custom": "from-destination"},
        method="PUT",
        headers=captured,
        body=body,
    )
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await _settled(ctx, ids_["task"], "succeeded")
    assert (got.method, got.target, got.body) == ("PUT", "/hook", body)
    assert got.headers == {
        "host": f"127.0.0.1:{destination.port}",
        "content-length": str(len(body)),
        "content-type": "application/json; charset=utf-8",
        "stripe-signature": captured["stripe-signature"],
        "x-custom": "from-destination",
        "x-kept": "ünïcode",
        "authorization": "Bearer dst-secret",
        "x-hookyard-event-id": ids_["event"],
        "x-hookyard-delivery-attempt": "1",
    }  # nothing else: no user-agent or accept of the HTTP client
    (delivery,) = await _deliveries(ctx, ids_["event"])
    assert delivery["source"] == "rule"
    assert (delivery["task_id"], delivery["rule_id"], delivery["destination_id"]) == (
        ids_["task"],
        ids_["rule"],
        ids_["destination"],
    )
    assert (delivery["destination_name"], delivery["destination_url"]) == ("sink", destination.url)
    assert delivery["attempt_number"] == 1
    assert delivery["request_headers"] == got.headers
    assert delivery["request_body"] == body.decode()
    assert (delivery["response_status"], delivery["response_body"]) == (200, '{"received":true}')
    assert delivery["success"] is True
    assert delivery["error"] is None
    assert 0 <= delivery["latency_ms"] < 2000
    assert (await _task_status(ctx, ids_["task"]))["attempts"] == 1


async def test_non_utf8_bodies_go_out_as_bytes_and_are_stored_as_base64(ctx: Context, destination: Destination) -> None:
    body = b"\xff\x00\xfebinary"
    ids_ = await _task(ctx, destination.url, headers={"content-type": "application/octet-stream"}, body=body)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await _settled(ctx, ids_["task"], "succeeded")
    assert got.body == body
    (delivery,) = await _deliveries(ctx, ids_["event"])
    assert base64.b64decode(delivery["request_body"]) == body


async def test_failures_are_retried_on_the_schedule_until_success(ctx: Context, destination: Destination) -> None:
    destination.reply(Reply(status=500, body=b"boom"), Reply(drop=True))
    ids_ = await _task(ctx, destination.url)
    async with running(ctx):
        requests = await destination.wait_for(3)
        await _settled(ctx, ids_["task"], "succeeded")
    assert [r.headers["x-hookyard-delivery-attempt"] for r in requests] == ["1", "2", "3"]
    assert {r.headers["x-hookyard-event-id"] for r in requests} == {ids_["event"]}
    rows = await _deliveries(ctx, ids_["event"])
    assert [(r["attempt_number"], r["response_status"], r["success"]) for r in rows] == [
        (1, 500, False),
        (2, None, False),
        (3, 200, True),
    ]
    assert rows[0]["response_body"] == "boom"
    assert rows[0]["error"] is None
    assert rows[1]["error"].startswith("connection closed")
    # ±20% around the 50 ms schedule (plus the time it takes to notice a due task).
    assert 0.035 <= requests[1].at - requests[0].at < 1.5


async def test_a_task_out_of_attempts_fails(ctx: Context, destination: Destination) -> None:
    destination.reply(default=Reply(status=503))
    ids_ = await _task(ctx, destination.url)
    async with running(ctx):
        row = await _settled(ctx, ids_["task"], "failed")
    assert len(destination.requests) == 3  # the first attempt and the two scheduled retries
    assert row["attempts"] == 3
    assert "HTTP 503" in row["last_error"]
    assert "no attempts left" in row["last_error"]
    assert [r["success"] for r in await _deliveries(ctx, ids_["event"])] == [False, False, False]


async def test_retry_after_is_honoured_when_longer(ctx: Context, destination: Destination) -> None:
    destination.reply(Reply(status=429, retry_after="1"))
    ids_ = await _task(ctx, destination.url)
    async with running(ctx):
        first, second = await destination.wait_for(2)
        await _settled(ctx, ids_["task"], "succeeded")
    assert 0.95 <= second.at - first.at < 3


async def test_a_timeout_is_a_failed_attempt_with_its_reason(
    ctx: Context, destination: Destination, settings: Settings
) -> None:
    destination.reply(Reply(delay_s=settings.deliver_timeout_s + 1))
    ids_ = await _task(ctx, destination.url)
    async with running(ctx):
        await _settled(ctx, ids_["task"], "succeeded", timeout=15)
    first = (await _deliveries(ctx, ids_["event"]))[0]
    assert first["response_status"] is None
    assert first["success"] is False
    assert first["error"].startswith("timeout")
    assert settings.deliver_timeout_s * 1000 <= first["latency_ms"] < settings.deliver_timeout_s * 1000 + 1000


@pytest.mark.parametrize("egress", ["public"])
async def test_public_egress_refuses_loopback_at_once(
    settings: Settings, destination: Destination, egress: str
) -> None:
    async with worker_context(msgspec.structs.replace(settings, egress=egress)) as ctx:
        ids_ = await _task(ctx, destination.url)
        named = await _task(ctx, f"http://localhost:{destination.port}/hook")
        async with running(ctx):
            refused = await _settled(ctx, ids_["task"], "failed")
            by_name = await _settled(ctx, named["task"], "failed")
        assert refused["attempts"] == 1
        assert by_name["attempts"] == 1
        assert "egress refused: 127.0.0.1 is a loopback address" in refused["last_error"]
        assert "is a loopback address" in by_name["last_error"]
        (row,) = await _deliveries(ctx, ids_["event"])
        assert row["error"].startswith("egress refused")
        assert row["response_status"] is None
    assert destination.requests == []


async def test_the_circuit_opens_pushes_tasks_back_and_closes_after_a_probe(
    settings: Settings, destination: Destination
) -> None:
    tuned = msgspec.structs.replace(
        settings,
        circuit_failure_threshold=3,
        circuit_cooldown_s=1.0,
        deliver_per_destination=1,
        retry_schedule_s=(60.0,),  # failed tasks stay out of the way
    )
    destination.reply(default=Reply(status=500))
    async with worker_context(tuned) as ctx:
        first = await _task(ctx, destination.url)
        tasks = [first] + [
            await _task(ctx, destination.url, endpoint_id=first["endpoint"], destination_id=first["destination"])
            for _ in range(7)
        ]
        circuit_sql = "SELECT circuit, consecutive_failures, circuit_opened_at FROM destinations WHERE id = $1"
        async with running(ctx) as deliver:

            async def opened() -> Any:
                row = await _row(ctx, circuit_sql, first["destination"])
                idle = deliver.in_flight == 0 and deliver.recorder.queued == 0
                return row if row["circuit"] == "open" and idle else None

            state = await wait_for(opened)
            failed_before = len(destination.requests)
            assert failed_before == 3  # no claims for a destination while a failure of it is being written
            destination.reply(default=Reply(status=200))
            await wait_for(lambda: _closed(ctx, first["destination"]), timeout=10)
            for task in tasks[failed_before:]:
                await _settled(ctx, task["task"], "succeeded")
        after = destination.requests[failed_before:]
        # While open, nothing was attempted: the first request after opening is the probe, a cool-down later.
        assert after[0].at >= state["circuit_opened_at"].timestamp() + tuned.circuit_cooldown_s - 0.05
        row = await _row(ctx, circuit_sql, first["destination"])
        assert (row["circuit"], row["consecutive_failures"], row["circuit_opened_at"]) == ("closed", 0, None)
        for task in tasks[failed_before:]:  # pushed back, not attempted: one attempt each
            assert (await _task_status(ctx, task["task"]))["attempts"] == 1


async def _closed(ctx: Context, destination_id: str) -> bool:
    row = await _row(ctx, "SELECT circuit FROM destinations WHERE id = $1", destination_id)
    return row["circuit"] == "closed"


async def test_expired_leases_are_swept_and_retried(ctx: Context, destination: Destination) -> None:
    ids_ = await _task(ctx, destination.url)
    async with ctx.pool.acquire() as conn:  # as a worker that died during attempt 1 leaves it
        await conn.execute(
            """UPDATE delivery_tasks SET status = 'in_flight', attempts = 1, lease_expires_at = now() - interval '1s'
                WHERE id = $1""",
            ids_["task"],
        )
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await _settled(ctx, ids_["task"], "succeeded")
    assert got.headers["x-hookyard-delivery-attempt"] == "2"


async def test_stopping_drains_in_flight_sends(ctx: Context, destination: Destination) -> None:
    destination.reply(Reply(delay_s=0.3))
    ids_ = await _task(ctx, destination.url)
    async with running(ctx):
        await destination.wait_for(1)
    # The block ended (stop + close) while the request was in flight: it finished and was recorded.
    assert (await _task_status(ctx, ids_["task"]))["status"] == "succeeded"
    assert len(await _deliveries(ctx, ids_["event"])) == 1


async def test_sends_outliving_the_drain_are_handed_back(settings: Settings, destination: Destination) -> None:
    destination.reply(Reply(delay_s=1.5))
    async with worker_context(msgspec.structs.replace(settings, deliver_drain_s=0.1)) as ctx:
        ids_ = await _task(ctx, destination.url)
        async with running(ctx):
            await destination.wait_for(1)
        row = await _row(
            ctx,
            "SELECT status, attempts, next_attempt_at <= now() AS due, last_error FROM delivery_tasks WHERE id = $1",
            ids_["task"],
        )
    assert (row["status"], row["attempts"], row["due"]) == ("pending", 1, True)
    assert "interrupted" in row["last_error"]


async def test_concurrency_is_capped_per_destination(settings: Settings, destination: Destination) -> None:
    destination.reply(default=Reply(delay_s=0.2))
    tuned = msgspec.structs.replace(settings, deliver_per_destination=2, deliver_concurrency=10)
    async with worker_context(tuned) as ctx:
        first = await _task(ctx, destination.url)
        tasks = [first] + [
            await _task(ctx, destination.url, endpoint_id=first["endpoint"], destination_id=first["destination"])
            for _ in range(5)
        ]
        async with running(ctx):
            for task in tasks:
                await _settled(ctx, task["task"], "succeeded")
    arrivals = sorted(r.at for r in destination.requests)
    # With 2 at a time and 0.2 s each, the 6 requests arrive in 3 waves.
    assert arrivals[2] - arrivals[0] >= 0.15
    assert arrivals[4] - arrivals[2] >= 0.15


@pytest.mark.slow
async def test_a_worker_killed_mid_request_loses_nothing(
    settings: Settings, ctx: Context, destination: Destination, tmp_path: Path
) -> None:
    destination.reply(Reply(delay_s=2.0))  # the first attempt is still in flight when the worker dies
    ids_ = await _task(ctx, destination.url)
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
        await _settled(ctx, ids_["task"], "succeeded", timeout=20)
    finally:
        stack.stop_all()
    assert [r.headers["x-hookyard-delivery-attempt"] for r in (first, second)] == ["1", "2"]
    assert first.headers["x-hookyard-event-id"] == second.headers["x-hookyard-event-id"] == ids_["event"]
    # Retried once the lease (3 s from the claim) ran out, not before.
    assert second.at >= first.at + 2.5
    assert second.at > killed_at
    rows = await _deliveries(ctx, ids_["event"])
    assert [(r["attempt_number"], r["success"]) for r in rows] == [(2, True)]  # attempt 1 died with its worker


@pytest.mark.slow
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
        assert got.at - sent_at < 2  # NOTIFY-driven: well under the poll interval in practice

        async def recorded() -> Any:
            event = (await api.get(f"/v1/events/{event_id}")).json()
            return event["deliveries"] if event.get("deliveries") else None

        (delivery,) = await wait_for(recorded)
        assert (delivery["source"], delivery["success"], delivery["response_status"]) == ("rule", True, 200)
        assert delivery["destination_id"] == created.json()["id"]


async def test_tls_destinations_are_verified(tmp_path: Path) -> None:
    """The asyncio network backend's TLS path: a trusted certificate works over a kept-alive connection,
    an untrusted one is a connection failure, never a silent downgrade."""
    with serving(tls_dir=tmp_path) as secure:
        trusted = egress.client(
            "any", timeout_s=2, connect_timeout_s=2, max_connections=2, ssl_context=secure.client_context()
        )
        untrusted = egress.client("any", timeout_s=2, connect_timeout_s=2, max_connections=2)
        async with trusted, untrusted:
            first = await send(trusted, "POST", secure.url, {"content-type": "text/plain"}, b"one", total_timeout_s=5)
            second = await send(trusted, "POST", secure.url, {}, b"two", total_timeout_s=5)
            refused = await send(untrusted, "POST", secure.url, {}, b"three", total_timeout_s=5)
        assert (first.status, second.status) == (200, 200)
        assert [r.body for r in secure.requests] == [b"one", b"two"]
        assert refused.status is None
        assert refused.error is not None
        assert "CERTIFICATE_VERIFY_FAILED" in refused.error


async def test_egress_policy_ranges() -> None:
    refused = {
        "127.0.0.1": "loopback",
        "10.1.2.3": "private",
        "192.168.0.10": "private",
        "172.16.5.5": "private",
        "100.64.0.1": "CGNAT",
        "169.254.169.254": "cloud metadata",
        "169.254.10.1": "link-local",
        "fd00:ec2::254": "cloud metadata",
        "::1": "loopback",
        "fe80::1": "link-local",
        "fc00::1": "private",
        "0.0.0.0": "unspecified",
        "224.0.0.1": "multicast",
        "::ffff:10.0.0.1": "private",
        "64:ff9b::7f00:1": "loopback",
    }
    for address, kind in refused.items():
        reason = egress.refusal(address)
        assert reason is not None, address
        assert kind in reason, (address, reason)
    for address in ("93.184.215.14", "2606:4700::1111", "1.1.1.1"):
        assert egress.refusal(address) is None, address


async def test_a_connection_the_destination_closed_while_idle_is_not_reused(destination: Destination) -> None:
    destination.idle_timeout_s = 0.05
    async with egress.client("any", timeout_s=2, connect_timeout_s=2, max_connections=1) as client:
        first = await send(client, "POST", destination.url, {}, b"one", total_timeout_s=5)

        async def closed() -> bool:
            return destination.idle_closed == 1

        await wait_for(closed)
        second = await send(client, "POST", destination.url, {}, b"two", total_timeout_s=5)
    assert (first.status, second.status) == (200, 200)


@pytest.mark.slow
async def test_sigterm_lets_in_flight_requests_finish(
    settings: Settings, ctx: Context, destination: Destination, tmp_path: Path
) -> None:
    destination.reply(Reply(delay_s=1.0))
    ids_ = await _task(ctx, destination.url)
    stack = Stack(settings, tmp_path, HOOKYARD_DELIVER_DRAIN_S="10")
    try:
        stack.start_worker("w", "deliver")
        await destination.wait_for(1, timeout=20)
        stack.kill("w", signal.SIGTERM)  # returns once the process exited
    finally:
        stack.stop_all()
    row = await _task_status(ctx, ids_["task"])
    assert (row["status"], row["attempts"]) == ("succeeded", 1)
    assert len(destination.requests) == 1
    assert [r["success"] for r in await _deliveries(ctx, ids_["event"])] == [True]
