"""A delivery whose transform call never ran (its account's other calls held every sandbox process it may use
past ``MAX_WAIT_S``) is not its code's failure: the attempt is recorded as failed and retried on the schedule,
delivered once a process is free, and its destination is not marked slowed. A fresh-clone trial of issue 42
saw such deliveries failed for good and their destination slowed, though their code never ran. A real deliver
worker and sandbox pool, a loopback destination written through /v1."""

from __future__ import annotations

import asyncio
import logging
import re

import msgspec
import pytest

from control.db.context import Context
from control.transform import pool as pool_module
from control.transform.pool import pool_for
from control.transform.process import PIPELINE
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, make_task, running, serving, settled, task_status
from tests.helpers import wait_for
from tests.transform.delivering import add_destination

RUNAWAY = "function handler(r) { for (;;) {} }"
WAITED = "transform failed: stopped: waited 0.3 s for a sandbox process (this account's other calls held them)"
HOLD = '{"request": {"method": "POST", "path": "/", "query": "", "headers": {}, "body": 1}, "context": {}}'


@pytest.fixture
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """The account may use one sandbox process; retries 5 s apart unless a test gives its schedule."""
    fast = {**FAST_DELIVERY, "retry_schedule_s": getattr(request, "param", (5.0, 5.0, 5.0)), "log_activity": True}
    return msgspec.structs.replace(settings, **fast, sandbox_processes=2, sandbox_per_account=1)


@pytest.fixture(autouse=True)
def _short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call gives up waiting for its turn after 0.3 s, not 20."""
    monkeypatch.setattr(pool_module, "MAX_WAIT_S", 0.3)


async def _held_task(ctx: Context, client, account, sink_url: str, calls: int) -> tuple[str, list[asyncio.Task], dict]:
    """A task of a transformed destination (its id, first), made once the account's one process has its
    pipeline full of runaway batches of another of its transforms, each of ``calls`` calls (stopped at 1 s
    each, then each run again alone: over a second per call). Inside ``running``."""
    endpoint, dst, _ = await add_destination(client, account, sink_url, "function handler(r) { return r; }")
    pool = pool_for(ctx.settings)
    held = [
        asyncio.create_task(pool.run_many(f"{RUNAWAY} // {i}", [HOLD] * calls, account=account.id, key=f"other{i}"))
        for i in range(PIPELINE)
    ]
    await wait_for(lambda: asyncio.sleep(0, account.id in pool._held))
    return dst, held, await make_task(ctx, sink_url, endpoint_id=endpoint, destination_id=dst)


async def test_a_delivery_whose_call_never_ran_is_retried_and_delivered(
    ctx: Context, client, account, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    with serving() as sink:
        async with running(ctx):
            dst, held, made = await _held_task(ctx, client, account, sink.url, 1)

            async def retrying() -> bool:
                row = await task_status(ctx, made["task"])
                return row["attempts"] == 1 and row["status"] == "pending"

            await wait_for(retrying, timeout=10)
            row = await task_status(ctx, made["task"])
            assert row["last_error"] == WAITED
            async with ctx.pool.acquire() as conn:
                records = await conn.fetch("SELECT success, transform FROM deliveries WHERE task_id = $1", made["task"])
            assert [(r["success"], r["transform"]["outcome"]) for r in records] == [(False, "failed")]
            assert records[0]["transform"]["error"]["message"] == WAITED.removeprefix("transform failed: ")
            await asyncio.gather(*held)
            done = await settled(ctx, made["task"], "succeeded", timeout=20)
        assert done["attempts"] == 2
        assert len(sink.requests) == 1
    lines = [
        r.getMessage() for r in caplog.records if r.name == "hookyard.activity" and made["event"] in r.getMessage()
    ]
    # what happened and how long the wait took, not the "in 0 ms" of a send that never happened
    waited = (
        r"  not sent: transform stopped after [3-9]\d\d ms \(waited 0\.3 s for a sandbox process .*\) \(attempt 1, "
    )
    assert re.search(waited, lines[0]), lines
    assert re.search(r"  200 in \d+ ms \(attempt 2\)$", lines[1]), lines
    shown = (await client.get(f"/v1/destinations/{dst}", headers=account.headers)).json()
    assert (shown["transform_slowed_at"], shown["transform_slowed_s"]) == (None, None)


@pytest.mark.parametrize("settings", [(0.05, 0.05)], indirect=True)
async def test_a_delivery_whose_call_never_ran_fails_once_its_attempts_run_out(ctx: Context, client, account) -> None:
    """Bounded: each attempt waits its turn for at most ``MAX_WAIT_S``; the last one fails the delivery."""
    with serving() as sink:
        async with running(ctx):
            _dst, held, made = await _held_task(ctx, client, account, sink.url, 4)
            done = await settled(ctx, made["task"], "failed", timeout=15)
            assert not any(h.done() for h in held)  # still held: every attempt waited past its bound
            for h in held:
                h.cancel()
        assert (done["attempts"], done["last_error"]) == (3, f"{WAITED} (attempt 3 of 3, no attempts left)")
        assert sink.requests == []
