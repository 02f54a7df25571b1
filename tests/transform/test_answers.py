"""What a sandbox process answers for a call whose returned request is JSON but not an object (a ``toJSON``
giving an array, a string, a number): that call fails, saying so, alone; its process lives on. Before, the pool
could not decode such an answer, took it for the process's death and killed it, and the call was recorded as
having crashed its process (a delivery's transform then marked crashed and never run again). Real processes."""

from __future__ import annotations

import json

import pytest

from control.transform.pool import Pool
from control.transform.wire import Input, Run

RETURNS = (
    "function handler(r, c) {"
    " if (c.n === 1) return { toJSON() { return [1, 2]; } };"
    " if (c.n === 2) return { toJSON() { return 'text'; } };"
    " return r; }"
)


def _input(n: int) -> Input:
    return Input(
        method="POST",
        url="https://example.com/hook",
        headers={"content-type": "application/json"},
        body=b'{"a": 1}',
        context={"n": n},
    )


def _payload(n: int) -> str:
    request = {"method": "POST", "path": "/", "query": "", "headers": {}, "body": 1}
    return json.dumps({"request": request, "context": {"n": n}})


@pytest.mark.parametrize("make", [_input, _payload], ids=["request", "json"])
async def test_a_returned_request_that_is_not_an_object_fails_its_call_alone(make) -> None:
    pool = Pool(size=1, per_account=1)
    try:
        await _fails_alone(pool, make)
    finally:
        await pool.close()


async def _fails_alone(pool: Pool, make) -> None:
    runs = await pool.run_many(RETURNS, [make(n) for n in range(4)], account="acct_a", key="k")
    assert all(isinstance(run, Run) for run in runs)
    assert [run.error is None for run in runs] == [True, False, False, True]
    assert "as JSON it is an array, not an object" in (runs[1].error or "")
    assert "as JSON it is a string, not an object" in (runs[2].error or "")
    assert not any(run.crashed or run.stopped for run in runs)
    alive = {process.proc.pid for process in pool._every if process.proc is not None and process.alive}
    assert len(alive) == 1  # the batch's process, never killed (nor one started for a call alone)
    again = await pool.run(RETURNS, make(0), account="acct_a", key="k")
    assert isinstance(again, Run)
    assert again.error is None
    assert {process.proc.pid for process in pool._every if process.proc is not None and process.alive} == alive
