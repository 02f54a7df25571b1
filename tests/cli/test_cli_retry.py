"""``hookyard tail`` says when a failed delivery is tried again ("retry at HH:MM:SS", local time) and when the
schedule gave up: its line read like the delivery's end either way. A real control process; the attempts and
their tasks stored as the deliver worker leaves them, after tail said "Following"."""

from __future__ import annotations

import asyncio
import io
import os
import signal
from datetime import UTC, datetime, timedelta

from control.cli.listen import tail
from control.cli.remote import Remote
from shared.settings import Settings
from tests.conftest import make_account
from tests.events_support import Ev, store, store_delivery, store_task
from tests.helpers import db
from tests.stack import Stack


async def _failed_attempt(settings: Settings, event: Ev, *, status: str, attempts: int, due: datetime) -> None:
    async with db(settings.database_url) as conn:
        await store(conn, None, None, [event])
        task = await store_task(
            conn,
            endpoint_id=event.endpoint_id,
            event_id=event.id,
            received_at=event.received_at,
            rule_id="rule_1",
            destination_id="dst_1",
            status=status,
        )
        await conn.execute(
            "UPDATE delivery_tasks SET attempts = $2, next_attempt_at = $3 WHERE id = $1", task, attempts, due
        )
        await store_delivery(
            conn,
            event.endpoint_id,
            event.id,
            created_at=datetime.now(UTC),
            success=False,
            attempt_number=attempts,
            task_id=task,
        )


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
        await _failed_attempt(settings, scheduled, status="pending", attempts=1, due=due)
        await _failed_attempt(settings, given_up, status="failed", attempts=10, due=due)
        await printed(f"attempt 1  {scheduled.id}", f"attempt 10  {given_up.id}")
    finally:
        if not tailing.done():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, caught by tail's handler on this loop
        code = await asyncio.wait_for(tailing, 30)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await remote.aclose()
    assert code == 0
    text = out.getvalue()
    assert f"attempt 1  {scheduled.id}  retry at {due.astimezone():%H:%M:%S}\n" in text, text
    assert f"attempt 10  {given_up.id}  gave up\n" in text, text
