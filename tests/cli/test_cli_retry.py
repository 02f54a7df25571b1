"""``hookyard tail`` says when a failed delivery is tried again ("retry at HH:MM:SS", local time) and when the
schedule gave up: its line read like the delivery's end either way. A real control process; the attempts and
their tasks stored as the deliver worker leaves them, after tail said "Following"."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from control.cli.remote import Remote
from control.cli.tail import tail
from shared.keys import Keys
from shared.settings import Settings
from tests.cli.webhooks_support import interrupted
from tests.conftest import make_account
from tests.events_support import Ev, store, store_failed_attempt
from tests.helpers import db, redis_client
from tests.stack import Stack


def _printed(out: io.StringIO, tailing: asyncio.Task[int], *, within_s: float) -> Callable[..., Awaitable[None]]:
    """Waits until tail's output holds every text given, within ``within_s`` of now, tail still running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s

    async def printed(*texts: str) -> None:
        while not all(t in out.getvalue() for t in texts):
            assert not tailing.done(), out.getvalue()
            assert loop.time() < deadline, out.getvalue()
            await asyncio.sleep(0.05)

    return printed


async def test_tail_says_when_a_failed_delivery_is_tried_again(shared_stack: Stack, module_settings: Settings) -> None:
    stack, settings = shared_stack, module_settings
    if "control" not in stack.procs:
        stack.start_control()
    account = await make_account(settings.database_url)
    remote = Remote(stack.control_url, account.key)
    endpoint_id = (await remote.call("POST", "/v1/endpoints", json={"name": "tailed"})).json()["id"]
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5)
    scheduled, given_up = Ev(endpoint_id), Ev(endpoint_id)
    out = io.StringIO()
    tailing = asyncio.create_task(tail(remote, endpoint_ref=endpoint_id, stream=out))
    printed = _printed(out, tailing, within_s=20)
    try:
        await printed("Following")
        async with db(settings.database_url) as conn:
            await store_failed_attempt(conn, scheduled, status="pending", attempts=1, due=due)
            await store_failed_attempt(conn, given_up, status="failed", attempts=10, due=due)
        await printed(f"attempt 1  {scheduled.id}", f"attempt 10  {given_up.id}")
    finally:
        code = await interrupted(tailing, remote)
    assert code == 0
    text = out.getvalue()
    assert f"attempt 1  {scheduled.id}  retry at {due.astimezone():%H:%M:%S}\n" in text, text
    assert f"attempt 10  {given_up.id}  gave up\n" in text, text


async def test_tail_of_every_endpoint_follows_one_made_after_it_started(
    shared_stack: Stack, module_settings: Settings
) -> None:
    """A trial user's endpoint made after "Following 1 endpoint(s)" was never followed: its events and attempts
    were not printed. Everything it has is printed once, what it had when found and what comes later."""
    stack, settings = shared_stack, module_settings
    if "control" not in stack.procs:
        stack.start_control()
    account = await make_account(settings.database_url)
    remote = Remote(stack.control_url, account.key)
    await remote.call("POST", "/v1/endpoints", json={"name": "there before"})
    out = io.StringIO()
    tailing = asyncio.create_task(tail(remote, endpoint_ref=None, stream=out))
    printed = _printed(out, tailing, within_s=30)
    try:
        await printed("Following 1 endpoint(s)")
        endpoint_id = (await remote.call("POST", "/v1/endpoints", json={"name": "made later"})).json()["id"]
        had, later = Ev(endpoint_id), Ev(endpoint_id)
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5)
        async with db(settings.database_url) as conn:
            await store_failed_attempt(conn, had, status="pending", attempts=1, due=due)
        await printed(f"following new endpoint {endpoint_id}", f"  {had.id}\n")
        async with db(settings.database_url) as conn, redis_client(settings.redis_url) as redis:
            # announced as the flush does: the follow wakes at once, not on its 5 s safety look
            await store(conn, redis, Keys(settings.redis_prefix), [later])
        await printed(f"  {later.id}\n", f"attempt 1  {had.id}  retry at")
    finally:
        code = await interrupted(tailing, remote)
    assert code == 0
    text = out.getvalue()
    assert text.count(f"  {had.id}\n") == text.count(f"  {later.id}\n") == 1, text  # each event's line once
    assert text.index(f"  {had.id}\n") < text.index(f"  {later.id}\n"), text
