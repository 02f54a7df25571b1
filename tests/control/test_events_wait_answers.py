"""events/wait answered outside Litestar (``control.api.wait_answers``, ADR 0068): the checks still answer in the
envelope, and a parked wait is answered by raw ASGI with the same bytes and headers.

Real Postgres and Redis, the app in the test's loop (``live``), as in ``test_events_wait``.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from control.service.events.read import PendingWait
from shared.settings import Settings
from tests.control.conftest import wait_scope, waiting
from tests.events_support import Ev
from tests.helpers import assert_error, wait_for


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Many concurrent calls with one key: the per-key rate limit, not under test here, is lifted."""
    return msgspec.structs.replace(settings, rate_limit_per_s=10_000, rate_limit_burst=10_000)


def _path(live) -> str:
    return f"/v1/endpoints/{live.endpoint}/events/wait"


def _scope(live, account, query: bytes) -> dict:
    return wait_scope(live, account, query, (b"x-request-id", b"wait-raw-1"))


async def test_a_woken_wait_is_answered_after_litestar_returned_with_the_same_headers(live, account):
    """The handler leaves the checked wait in the scope and Litestar sends nothing; the answer (status, the
    two headers, ``x-request-id`` from ``before_send``, the body encoded once) is sent around it."""
    sent: list[dict] = []
    received = False

    async def receive():
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = _scope(live, account, b"timeout=30")
    call = asyncio.create_task(live.app(scope, receive, send))
    await wait_for(waiting(live))
    assert isinstance(scope["hookyard.wait"], PendingWait)  # parked: Litestar's handler has returned
    assert sent == []
    ev = Ev(live.endpoint, event_type="raw.answer", body=b'{"n": 1}')
    await live.announce(ev)
    await asyncio.wait_for(call, 10)
    start, body = sent
    assert start["type"] == "http.response.start"
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers.keys() == {b"content-type", b"content-length", b"x-request-id"}
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"x-request-id"] == b"wait-raw-1"
    assert int(headers[b"content-length"]) == len(body["body"])
    assert body["more_body"] is False
    assert msgspec.json.decode(body["body"])["event"]["id"] == ev.id
    assert live.wakeups.waiter_count() == 0


async def test_a_timed_out_parked_wait_answers_204_with_its_request_id(live, account):
    resp = await live.client.get(
        _path(live), params={"timeout": 1}, headers={**account.headers, "x-request-id": "wait-raw-204"}
    )
    assert resp.status_code == 204
    assert resp.content == b""
    assert resp.headers["x-request-id"] == "wait-raw-204"
    assert live.wakeups.waiter_count() == 0


async def test_refusals_before_the_wait_keep_the_envelope_and_park_nothing(live, account):
    resp = await live.client.get(_path(live), params={"timeout": 1})
    assert_error(resp, 401, "unauthorized")
    assert resp.headers["x-request-id"]
    resp = await live.client.get(_path(live), params={"timeout": 1}, headers={"Authorization": "Bearer hy_nope"})
    assert_error(resp, 401, "unauthorized")
    resp = await live.client.get(_path(live), params={"timeuot": 1}, headers=account.headers)
    assert_error(resp, 400, "validation_error", field="timeuot")
    resp = await live.client.get(_path(live), params={"timeout": 99}, headers=account.headers)
    assert_error(resp, 400, "validation_error", field="timeout")
    resp = await live.client.get("/v1/endpoints/ep_missing/events/wait", params={"timeout": 1}, headers=account.headers)
    assert_error(resp, 404, "not_found")
    assert live.wakeups.waiter_count() == 0
