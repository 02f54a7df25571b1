"""GET /v1/endpoints/{id}/events/wait: the long poll, against real Postgres and Redis pub/sub.

Requests run in the test's own event loop (``live_app``), so a wait can be in flight while the test
stores and announces events the way the flush worker does. Every "the wait is in place" step waits for a
condition on the app's ``Wakeups`` with a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from control.db.context import Principal
from control.service.events import read as service
from control.support.metrics import CONTROL
from shared.settings import Settings
from tests.control.conftest import wait_scope, waiting
from tests.events_support import EVENT_FIELDS, Ev, store
from tests.helpers import assert_error, create_endpoint, db, wait_for


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Hundreds of concurrent calls with one key: the per-key rate limit, not under test here, is lifted."""
    return msgspec.structs.replace(settings, rate_limit_per_s=10_000, rate_limit_burst=10_000)


def _start(live, account, **params):
    return asyncio.create_task(
        live.client.get(f"/v1/endpoints/{live.endpoint}/events/wait", params=params, headers=account.headers)
    )


async def test_times_out_with_204_and_no_body(live, account):
    started = time.monotonic()
    resp = await live.client.get(f"/v1/endpoints/{live.endpoint}/events/wait?timeout=1", headers=account.headers)
    elapsed = time.monotonic() - started
    assert resp.status_code == 204
    assert resp.content == b""
    assert 0.9 <= elapsed < 5
    assert live.wakeups.waiter_count() == 0


async def test_returns_an_event_announced_during_the_wait(live, account):
    task = _start(live, account, timeout=30)
    await wait_for(waiting(live, calls=[task]))
    ev = Ev(live.endpoint, event_type="invoice.paid", body=b'{"n": 1}')
    await live.announce(ev)
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"event"}
    assert set(body["event"]) == EVENT_FIELDS
    assert body["event"]["id"] == ev.id
    assert body["event"]["body"] == '{"n": 1}'


async def test_non_matching_events_do_not_end_the_wait(live, account):
    task = _start(live, account, timeout=30, type="orders/paid", method="post")
    await wait_for(waiting(live))
    await live.announce(Ev(live.endpoint, event_type="orders/create"))
    await live.announce(Ev(live.endpoint, event_type="orders/paid", method="GET"))
    match = Ev(live.endpoint, event_type="orders/paid")
    await live.announce(Ev(live.endpoint, event_type="other"), match)
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == match.id


async def test_waiters_of_other_endpoints_are_not_woken(live, account):
    other = (await create_endpoint(live.client, account.headers, name="other"))["id"]
    task = _start(live, account, timeout=30)
    await wait_for(waiting(live, calls=[task]))
    await live.announce(Ev(other))
    ev = Ev(live.endpoint)
    await live.announce(ev)
    assert (await asyncio.wait_for(task, 10)).json()["event"]["id"] == ev.id


async def test_since_returns_an_already_stored_match_at_once(live, account):
    then = datetime.now(UTC) - timedelta(minutes=5)
    first = Ev(live.endpoint, received_at=then + timedelta(seconds=1), provider="payments")
    await live.announce(
        Ev(live.endpoint, received_at=then - timedelta(minutes=1), provider="payments"),
        first,
        Ev(live.endpoint, received_at=then + timedelta(seconds=2), provider="payments"),
        Ev(live.endpoint, received_at=then, provider="commerce"),
    )
    started = time.monotonic()
    resp = await live.client.get(
        f"/v1/endpoints/{live.endpoint}/events/wait",
        params={"since": then.isoformat(), "provider": "payments", "timeout": 55},
        headers=account.headers,
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == first.id  # the earliest match at or after `since`
    assert time.monotonic() - started < 5
    assert live.wakeups.waiter_count() == 0


async def test_since_in_the_past_still_waits_for_a_new_match(live, account):
    since = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")  # no zone: UTC
    task = _start(live, account, timeout=30, since=since)
    await wait_for(waiting(live))
    ev = Ev(live.endpoint)
    await live.announce(ev)
    assert (await asyncio.wait_for(task, 10)).json()["event"]["id"] == ev.id


async def test_without_since_only_events_of_the_call_count(live, account):
    await live.announce(Ev(live.endpoint, received_at=datetime.now(UTC) - timedelta(seconds=1)))
    resp = await live.client.get(f"/v1/endpoints/{live.endpoint}/events/wait?timeout=1", headers=account.headers)
    assert resp.status_code == 204


async def test_an_event_received_before_the_call_but_stored_during_it_counts(live, account):
    """It was not visible to a list made just before the wait, so the wait must not skip it."""
    late = Ev(live.endpoint, received_at=datetime.now(UTC) - timedelta(seconds=2))
    task = _start(live, account, timeout=30)
    await wait_for(waiting(live, calls=[task]))
    await live.announce(late)
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == late.id


async def test_two_hundred_waiters_are_woken_by_one_event(live, account):
    tasks = [_start(live, account, timeout=30) for _ in range(200)]
    await wait_for(waiting(live, 200, tasks), timeout=20)
    ev = Ev(live.endpoint)
    await live.announce(ev)
    responses = await asyncio.wait_for(asyncio.gather(*tasks), 20)
    assert [r.status_code for r in responses] == [200] * 200
    assert {r.json()["event"]["id"] for r in responses} == {ev.id}
    # one pub/sub connection served them all, and the last waiter leaving unsubscribed it
    connections = [c for c in await live.redis.client_list() if c.get("name") == live.wakeups.client_name]
    assert sum(1 for c in connections if int(c["sub"]) > 0) == 1
    await wait_for(live.unsubscribed)
    assert live.wakeups.waiter_count() == 0


async def test_the_wait_survives_a_redis_reconnect(live, account):
    task = _start(live, account, timeout=30, type="wanted")
    await wait_for(waiting(live))
    generation = await live.kill_pubsub()
    await live.announce(Ev(live.endpoint, event_type="unwanted"))  # maybe lost with the connection: harmless

    async def reconnected():
        return live.wakeups.generation > generation and live.wakeups.is_subscribed(live.channel)

    await wait_for(reconnected)
    assert not task.done()
    ev = Ev(live.endpoint, event_type="wanted")
    await live.announce(ev)
    resp = await asyncio.wait_for(task, 10)
    assert resp.json()["event"]["id"] == ev.id


async def test_a_match_whose_announcement_was_lost_is_found_after_the_reconnect(live, account):
    task = _start(live, account, timeout=30)
    await wait_for(waiting(live, calls=[task]))
    ev = Ev(live.endpoint)
    await store(live.conn, None, None, [ev])  # committed, announcement lost (never published)
    await live.kill_pubsub()
    resp = await asyncio.wait_for(task, 15)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == ev.id


async def test_a_client_that_disconnects_frees_its_waiter_at_once(live, account):
    gone = asyncio.Event()
    sent = []

    async def receive():
        if not sent:
            sent.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = wait_scope(live, account, b"timeout=55")
    call = asyncio.create_task(live.app(scope, receive, send))
    await wait_for(waiting(live))
    gone.set()
    await asyncio.wait_for(call, 5)
    assert live.wakeups.waiter_count() == 0
    await wait_for(live.unsubscribed)


async def test_invalid_timeout_and_filters_are_400(live, account):
    for params, name in (
        ({"timeout": "0"}, "timeout"),
        ({"timeout": "56"}, "timeout"),
        ({"timeout": "x"}, "timeout"),
        ({"timeout": "1.5"}, "timeout"),
        ({"since": "soon"}, "since"),
        ({"provider": "nope"}, "provider"),
        ({"signature_valid": "perhaps"}, "signature_valid"),
    ):
        resp = await live.client.get(
            f"/v1/endpoints/{live.endpoint}/events/wait", params=params, headers=account.headers
        )
        assert_error(resp, 400, "validation_error", field=name)
    assert live.wakeups.waiter_count() == 0


async def test_an_out_of_range_timeout_says_the_range(live, account):
    """A timeout past the range names the range, not only the bound it crossed (it once read
    `timeout: Expected `int` <= 55`, a number written nowhere in the docs), as does one that is no integer at
    all (it read `timeout: Expected `int`, got `str``); so do the lists' `limit`s. Text that is no number is
    shown as a JSON string, as a tool's `"abc"` is (it read `got abc`)."""
    for value, shown in (("60", "60"), ("0", "0"), ("-3", "-3"), ("abc", '"abc"'), ("1.5", "1.5"), ("0x1", '"0x1"')):
        resp = await live.client.get(
            f"/v1/endpoints/{live.endpoint}/events/wait", params={"timeout": value}, headers=account.headers
        )
        assert_error(resp, 400, "validation_error", field="timeout")
        assert resp.json()["error"]["message"] == (
            f"timeout: must be an integer from 1 to 55 (seconds to wait), got {shown}"
        )
    resp = await live.client.get(f"/v1/endpoints/{live.endpoint}/events?limit=500", headers=account.headers)
    assert resp.json()["error"]["message"] == "limit: must be an integer from 1 to 100 (page size), got 500"
    assert live.wakeups.waiter_count() == 0


async def _reads_idle():
    """No database read of a waiter is in flight (first looks and shared reads alike)."""
    return not service._inflight


def _parked(live, count):
    """``count`` waiters sit in their wait with their first look done and nothing in flight. Registered and
    subscribed is not enough before an event is stored: a waiter still on its way to the first look would
    find that event itself and leave, and the announcement the test then makes would start no read."""

    async def check():
        return live.wakeups.parked_count() >= count and not service._inflight

    return check


def _reading():
    async def check():
        return bool(service._inflight)

    return check


@contextlib.asynccontextmanager
async def _events_locked(live):
    """Holds an ACCESS EXCLUSIVE lock on ``events`` so every waiter's read blocks until the block ends:
    the reads are then in flight for as long as the test needs, with no timing involved."""
    async with db(live.database_url) as locker:
        tx = locker.transaction()
        await tx.start()
        await locker.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            await tx.rollback()


async def test_one_announcement_answers_each_filter_group_and_leaves_the_others_waiting(live, account):
    paid = [_start(live, account, timeout=30, type="invoice.paid") for _ in range(3)]
    created = [_start(live, account, timeout=30, type="invoice.created") for _ in range(3)]
    refund = _start(live, account, timeout=30, type="refund")
    await wait_for(waiting(live, 7, [*paid, *created, refund]))
    a = Ev(live.endpoint, event_type="invoice.created", body=b'{"n": "a"}')
    b = Ev(live.endpoint, event_type="invoice.paid", body=b'{"n": "b"}')
    await live.announce(a, b)  # one PUBLISH carrying both ids
    for calls, ev in ((paid, b), (created, a)):
        for resp in await asyncio.wait_for(asyncio.gather(*calls), 10):
            assert resp.status_code == 200, resp.text
            assert resp.headers["content-type"] == "application/json"
            body = resp.json()
            assert set(body) == {"event"}
            assert set(body["event"]) == EVENT_FIELDS
            assert (body["event"]["id"], body["event"]["body"]) == (ev.id, ev.body.decode())
    await wait_for(_reads_idle)  # the refund waiter's read of this announcement is over too
    assert not refund.done()
    assert live.wakeups.waiter_count(live.channel) == 1
    await live.announce(Ev(live.endpoint, event_type="invoice.paid"))
    mine = Ev(live.endpoint, event_type="refund")
    await live.announce(mine)
    assert (await asyncio.wait_for(refund, 10)).json()["event"]["id"] == mine.id


async def test_waiters_asking_the_same_question_share_one_read(live, account):
    ctx, principal = live.app.state.ctx, Principal(account_id=account.id, key_id="test", kind="live")

    def call(event_type):
        filters = service.event_filters(event_type=event_type)  # equal filters, distinct objects
        return asyncio.create_task(
            service.wait_for_event(ctx, live.wakeups, principal, live.endpoint, filters, timeout_s=30)
        )

    same = [call("shared") for _ in range(5)]
    apart = [call("apart") for _ in range(2)]
    await wait_for(waiting(live, 7, [*same, *apart]))
    await wait_for(_parked(live, 7))
    one, two = Ev(live.endpoint, event_type="shared"), Ev(live.endpoint, event_type="apart")
    await live.announce(one, two)
    shared = await asyncio.wait_for(asyncio.gather(*same), 10)
    assert shared[0].id == one.id
    assert all(event is shared[0] for event in shared)  # one read answered all five
    other = await asyncio.wait_for(asyncio.gather(*apart), 10)
    assert other[0].id == two.id
    assert other[1] is other[0]
    assert other[0] is not shared[0]


async def test_a_waiter_leaving_during_a_shared_read_does_not_cancel_the_others(live, account):
    stays, leaves = _start(live, account, timeout=30), _start(live, account, timeout=30)
    await wait_for(waiting(live, 2, [stays, leaves]))
    await wait_for(_parked(live, 2))
    ev = Ev(live.endpoint)
    await store(live.conn, None, None, [ev])
    async with _events_locked(live):
        await live.redis.publish(live.channel, ev.id)
        await wait_for(_reading())  # the shared read is in flight, blocked on the lock
        leaves.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaves
        assert live.wakeups.waiter_count(live.channel) == 1
    resp = await asyncio.wait_for(stays, 10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == ev.id
    assert live.wakeups.waiter_count() == 0


async def test_a_waiter_is_parked_once_its_first_look_is_done_and_the_gauge_says_so(live, account):
    """``hookyard_wait_parked`` (what ``bench wait`` sends its event on) counts a waiter once nothing stands
    between an announcement and its answer: not while registered and subscribed but still in its first look
    (a sender timing a wake-up then would time that look too), and not while it reads an announcement."""

    async def gauge():
        text = CONTROL.render().decode()  # what control's metrics port serves (not the API's: ADR 0095)
        return [line for line in text.splitlines() if line.startswith("hookyard_wait_parked ")]

    async with _events_locked(live):
        task = _start(live, account, timeout=30, type="wanted")
        await wait_for(waiting(live, 1, [task]))  # registered and subscribed
        await wait_for(_reading())  # its first look is in flight, blocked on the lock
        assert live.wakeups.waiter_count(live.channel) == 1
        assert live.wakeups.parked_count() == 0
        assert await gauge() == ["hookyard_wait_parked 0.0"]
    await wait_for(_parked(live, 1))
    assert await gauge() == ["hookyard_wait_parked 1.0"]
    unwanted, wanted = Ev(live.endpoint, event_type="unwanted"), Ev(live.endpoint, event_type="wanted")
    await store(live.conn, None, None, [unwanted, wanted])
    async with _events_locked(live):
        await live.redis.publish(live.channel, unwanted.id)
        await wait_for(_reading())  # reading an announcement: not parked
        assert live.wakeups.parked_count() == 0
    await wait_for(_parked(live, 1))  # that read found nothing: parked again
    await live.redis.publish(live.channel, wanted.id)
    assert (await asyncio.wait_for(task, 10)).json()["event"]["id"] == wanted.id
    assert live.wakeups.parked_count() == 0


async def test_news_that_arrives_during_a_read_is_read_next(live, account):
    task = _start(live, account, timeout=30, type="wanted")
    await wait_for(waiting(live, 1, [task]))
    await wait_for(_parked(live, 1))
    unwanted, wanted = Ev(live.endpoint, event_type="unwanted"), Ev(live.endpoint, event_type="wanted")
    await store(live.conn, None, None, [unwanted, wanted])
    (waiter,) = live.wakeups._channels[live.channel]

    async def queued():
        return waiter._ids == [wanted.id]

    async with _events_locked(live):
        await live.redis.publish(live.channel, unwanted.id)
        await wait_for(_reading())  # the read of `unwanted` is in flight
        await live.redis.publish(live.channel, wanted.id)
        await wait_for(queued)  # announced while that read runs: kept for the next one
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == wanted.id


async def test_a_match_being_read_when_the_timeout_ends_is_still_returned(live, account):
    then = datetime.now(UTC) - timedelta(minutes=1)
    ev = Ev(live.endpoint, received_at=then)
    await store(live.conn, None, None, [ev])
    async with _events_locked(live):
        started = time.monotonic()
        task = _start(live, account, timeout=1, since=then.isoformat())
        await wait_for(_reading())  # its first read is blocked on the lock

        async def timed_out():
            return time.monotonic() - started > 1.5

        await wait_for(timed_out)
        assert not task.done()
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == ev.id


async def test_a_stopping_server_answers_every_wait_at_once(live, account):
    """``Wakeups.stop`` (the control app calls it on SIGINT/SIGTERM, before granian drains): parked waits,
    plain and positioned, answer 204 now (the positioned one with its cursor), and so does a wait that
    arrives after it."""
    plain = _start(live, account, timeout=50)
    followed = _start(live, account, timeout=50, after="now")
    await wait_for(waiting(live, count=2, calls=[plain, followed]))
    started = time.monotonic()
    live.wakeups.stop()
    answers = await asyncio.wait_for(asyncio.gather(plain, followed), 10)
    assert time.monotonic() - started < 5
    assert [a.status_code for a in answers] == [204, 204]
    cursor = answers[1].headers["hookyard-cursor"]
    assert cursor
    late = await asyncio.wait_for(_start(live, account, timeout=50, after=cursor), 10)
    assert late.status_code == 204
    assert late.headers["hookyard-cursor"]
