"""``hookyard tail`` says when a failed delivery is tried again ("retry at HH:MM:SS", local time) and when the
schedule gave up: its line read like the delivery's end either way. A real control process; the attempts and
their tasks stored as the deliver worker leaves them, after tail said "Following"."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta

from control.cli.listen import tail
from control.cli.remote import Remote
from shared.settings import Settings
from tests.cli.webhooks_support import interrupted
from tests.conftest import make_account
from tests.events_support import Ev, store_failed_attempt
from tests.helpers import db
from tests.stack import Stack


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
    loop = asyncio.get_running_loop()
    try:
        deadline = loop.time() + 20

        async def printed(*texts: str) -> None:
            while not all(t in out.getvalue() for t in texts):
                assert not tailing.done(), out.getvalue()
                assert loop.time() < deadline, out.getvalue()
                await asyncio.sleep(0.05)

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
