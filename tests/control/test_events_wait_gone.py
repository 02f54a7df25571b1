"""A long poll whose endpoint goes away while it waits is told so: 404 at once when the endpoint is deleted
(its delete announces it on the endpoint's channel), 410 at the deadline when it expired meanwhile, never a
204 that reads as "nothing arrived" and sends the caller back to wait on an endpoint that no longer exists."""

from __future__ import annotations

import asyncio
import time

from tests.control.conftest import waiting
from tests.helpers import assert_error, wait_for


def _wait(live, account, timeout: int):
    return asyncio.create_task(
        live.client.get(f"/v1/endpoints/{live.endpoint}/events/wait?timeout={timeout}", headers=account.headers)
    )


async def test_deleting_the_endpoint_answers_its_waiters_404_at_once(live, account):
    tasks = [_wait(live, account, 30) for _ in range(3)]
    await wait_for(waiting(live, count=3, calls=tasks))
    started = time.monotonic()
    deleted = await live.client.delete(f"/v1/endpoints/{live.endpoint}", headers=account.headers)
    assert deleted.status_code in (200, 204), deleted.text
    answers = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert time.monotonic() - started < 10  # not the 30 s deadline
    for resp in answers:
        assert live.endpoint in assert_error(resp, 404, "not_found")["message"]
    assert live.wakeups.waiter_count() == 0


async def test_an_endpoint_that_expires_during_the_wait_is_410_at_the_deadline(live, account):
    task = _wait(live, account, 2)
    await wait_for(waiting(live, calls=[task]))
    await live.conn.execute(
        "UPDATE endpoints SET temporary = true, expires_at = now() - interval '1 minute' WHERE id = $1",
        live.endpoint,
    )
    resp = await asyncio.wait_for(task, 10)
    assert live.endpoint in assert_error(resp, 410, "endpoint_expired")["message"]


async def test_another_endpoints_delete_leaves_the_wait_alone(live, account):
    other = await live.client.post("/v1/endpoints", json={"name": "other"}, headers=account.headers)
    assert other.status_code == 201, other.text
    task = _wait(live, account, 2)
    await wait_for(waiting(live, calls=[task]))
    deleted = await live.client.delete(f"/v1/endpoints/{other.json()['id']}", headers=account.headers)
    assert deleted.status_code in (200, 204), deleted.text
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 204


async def test_a_follow_whose_endpoint_is_deleted_answers_404_at_once(live, account):
    """``after=`` (what ``hookyard listen`` runs on) keeps its own loop: the delete reaches it too."""
    path = f"/v1/endpoints/{live.endpoint}/events/wait"
    task = asyncio.create_task(live.client.get(path, params={"after": "now", "timeout": 30}, headers=account.headers))
    await wait_for(waiting(live, calls=[task]))
    started = time.monotonic()
    deleted = await live.client.delete(f"/v1/endpoints/{live.endpoint}", headers=account.headers)
    assert deleted.status_code in (200, 204), deleted.text
    resp = await asyncio.wait_for(task, 10)
    assert time.monotonic() - started < 10
    assert live.endpoint in assert_error(resp, 404, "not_found")["message"]


async def test_the_inbox_stream_of_a_deleted_endpoint_ends_so_the_page_learns_why(live, account):
    """The stream ends instead of passing the delete's note on as an event id; the page's reconnect then
    meets the 404 and shows it (``inbox.js``)."""
    task = asyncio.create_task(live.client.get(f"/inbox/{live.endpoint}/stream", headers=account.headers))
    await wait_for(waiting(live, calls=[task]))
    deleted = await live.client.delete(f"/v1/endpoints/{live.endpoint}", headers=account.headers)
    assert deleted.status_code in (200, 204), deleted.text
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200
    assert "event: sync" in resp.text
    assert "gone" not in resp.text
    assert "event: events" not in resp.text
    again = await live.client.get(f"/inbox/{live.endpoint}/stream", headers=account.headers)
    assert again.status_code == 404
