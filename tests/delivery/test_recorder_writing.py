"""A batch whose write is under way is still the Recorder's: counted in ``queued`` and among its
``task_ids``, which the deliver loop keeps out of its sweep of expired leases. A write can wait for seconds
(a lock, a refused connection being retried at the end of an outage); the batch used to vanish from both
meanwhile, so a sweep in that window could hand its tasks back to be sent again, and the worker counted
fewer results waiting than it held (issue 44: the outage test saw one worker hold 4 results, then 0)."""

from __future__ import annotations

import asyncio

from control.db.context import Context
from control.delivery.recorder import Recorder
from tests.delivery.rows import finished_attempt
from tests.destination import Destination, task_status
from tests.helpers import blocked_by, db


async def test_a_batch_being_written_is_still_queued_and_kept_from_the_sweep(
    ctx: Context, destination: Destination, database_url: str
) -> None:
    attempts = [await finished_attempt(ctx, destination) for _ in range(3)]
    ids = {a.task_id for a in attempts}
    recorder = Recorder(ctx)
    async with db(database_url) as holder, db(database_url) as observer:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM delivery_tasks WHERE id = ANY($1::text[]) FOR UPDATE", list(ids))
            for attempt in attempts:  # queued before the writer runs: one batch
                recorder.add(attempt)
            await blocked_by(observer, holder)  # the batch's write waits for the tasks' rows
            assert recorder.queued == 3
            assert set(recorder.task_ids()) == ids
        await asyncio.wait_for(recorder.drain(timeout_s=20), 30)
    assert recorder.queued == 0
    assert list(recorder.task_ids()) == []
    for task_id in ids:
        assert (await task_status(ctx, task_id))["status"] == "succeeded"
