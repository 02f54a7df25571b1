"""A worker stopped while a delivery's transform call still waits in the sandbox pool's queue hands the task
back uncounted: nothing of it went out, so after a restart it is sent as attempt 1. The drain's cut-off
handed it back as an interrupted attempt (``tasks.release``: counted, for a send that may have arrived), and
the delivery was then sent as attempt 2, one of its schedule's attempts spent on a call that never ran. A
real deliver worker and sandbox pool (stopped as on SIGTERM), a loopback destination written through /v1; the
destination is rate-limited, so its attempt runs the transform itself (not ahead of its send)."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from control.db.context import Context
from control.transform.pool import pool_for
from control.transform.process import PIPELINE
from shared.settings import Settings
from tests.delivery_shaping.support import set_shaping
from tests.destination import FAST_DELIVERY, fetch_row, make_task, running, serving, settled, task_status
from tests.helpers import wait_for
from tests.transform.delivering import add_destination

RUNAWAY = "function handler(r) { for (;;) {} }"
HOLD = '{"request": {"method": "POST", "path": "/", "query": "", "headers": {}, "body": 1}, "context": {}}'


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The account may use one sandbox process; a stop's drain gives sends 0.3 s."""
    return msgspec.structs.replace(
        settings, **FAST_DELIVERY, sandbox_processes=2, sandbox_per_account=1, deliver_drain_s=0.3
    )


async def test_a_transform_call_still_queued_at_a_stop_is_handed_back_uncounted(ctx: Context, client, account) -> None:
    with serving() as sink:
        endpoint, dst, _ = await add_destination(client, account, sink.url, "function handler(r) { return r; }")
        await set_shaping(ctx, dst, rate_limit_per_s=100.0)
        async with running(ctx) as deliver:
            pool = pool_for(ctx.settings)
            held = [  # the account's one process, its pipeline full of runaway batches (over 4 s each)
                asyncio.create_task(pool.run_many(f"{RUNAWAY} // {i}", [HOLD] * 4, account=account.id, key=f"o{i}"))
                for i in range(PIPELINE)
            ]
            await wait_for(lambda: asyncio.sleep(0, account.id in pool._held))
            made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
            await wait_for(lambda: asyncio.sleep(0, deliver.transforms.parked == 1), timeout=10)
        await asyncio.gather(*held, return_exceptions=True)  # ended by the pool's close
        row = await task_status(ctx, made["task"])
        assert (row["status"], row["attempts"]) == ("pending", 0), dict(row)
        async with running(ctx):  # the restart
            await settled(ctx, made["task"], "succeeded", timeout=15)
        assert len(sink.requests) == 1
    recorded = await fetch_row(
        ctx, "SELECT count(*) AS n, max(attempt_number) AS last FROM deliveries WHERE task_id = $1", made["task"]
    )
    assert (recorded["n"], recorded["last"]) == (1, 1)  # no record of the unrun call; sent as attempt 1
