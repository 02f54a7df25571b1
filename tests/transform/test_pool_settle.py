"""A batch for a process that is up is written in the pump's turn and settled in the turn that reads its
answer: no task per batch between the answer and the next write, or between the answer and the calls'
results (issue 42, ADR 0060: the child waited for its next frame 62% of a transformed bench round)."""

from __future__ import annotations

import asyncio
import json

from control.transform.pool import Pool
from control.transform.wire import Run

PAYLOAD = json.dumps({"request": {"method": "POST", "path": "/", "query": "", "headers": {}, "body": 1}, "context": {}})
ECHO = "function handler(r) { return r; }"
SLOW = "function handler(r) { const t = Date.now(); while (Date.now() - t < 30) {} return r; }"


async def test_batches_of_a_running_process_take_no_task_and_all_come_back() -> None:
    pool = Pool(size=2, per_account=1)
    try:
        assert isinstance(await pool.run(ECHO, PAYLOAD, account="acct", key="k"), Run)  # the process is up
        calls = [asyncio.ensure_future(pool.run(SLOW, PAYLOAD, account="acct", key="k")) for _ in range(3)]
        await asyncio.sleep(0)
        more: list[asyncio.Future[object]] = []
        for _ in range(20):  # batches written, answered and followed by the next while these wait
            await asyncio.sleep(0.01)
            assert not pool._tasks, pool._tasks  # no task carries a batch of a process that is up
            more.append(asyncio.ensure_future(pool.run(SLOW, PAYLOAD, account="acct", key="k")))
        results = await asyncio.gather(*calls, *more)
        assert all(isinstance(r, Run) and r.error is None for r in results), results
    finally:
        await pool.close()
