"""A bulk retry asks a crashed transform to run again, as a single retry does: it clears the destination's
crash mark with the deliveries it makes due. It did not, and each retried delivery failed again at once
without its transform being tried ("not run: ... retry the delivery to run it again"), its attempt spent.
A real deliver worker and sandbox pool, the retries loop's step, a loopback destination written through /v1."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from control.db.context import Context
from control.workers.retries import RetryJobs
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, fetch_row, make_task, running, serving, settled
from tests.helpers import wait_for
from tests.transform.delivering import add_destination, has_attempts
from tests.transform.fatal import FATAL

CRASHED = "transform failed: stopped: the transform ended its sandbox process"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY)


async def _retried(ctx: Context, task_id: str) -> Any:
    """The task once its second attempt is recorded and it is failed again."""

    async def second() -> bool:
        return await has_attempts(ctx, task_id, 2)

    await wait_for(second, timeout=15)
    return await settled(ctx, task_id, "failed")


async def test_a_bulk_retry_runs_a_crashed_transform_again(ctx: Context, client, account) -> None:
    with serving() as sink:
        endpoint, dst, _ = await add_destination(client, account, sink.url, FATAL)
        made = [await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst) for _ in range(2)]
        async with running(ctx):
            for m in made:
                failed = await settled(ctx, m["task"], "failed")
                assert failed["last_error"].startswith(CRASHED), failed["last_error"]
            marked = await fetch_row(ctx, "SELECT transform_crashed_at FROM destinations WHERE id = $1", dst)
            assert marked["transform_crashed_at"] is not None
            url = f"/v1/endpoints/{endpoint}/deliveries/retry"
            resp = await client.post(url, params={"success": "false"}, headers=account.headers)
            assert resp.status_code == 202, resp.text
            assert await RetryJobs(ctx).step() > 0  # the job's page: both made due, the mark cleared
            for m in made:
                again = await _retried(ctx, m["task"])
                assert again["last_error"].startswith(CRASHED), again["last_error"]  # run, and crashed again
        assert sink.requests == []
