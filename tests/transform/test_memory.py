"""What a call may allocate, with real sandbox processes: V8 checks its 64 MB only after a garbage collection,
so one large allocation that none follows ran whole and answered (a 256 MB string made flat:
``error: null``, the process's peak RSS up 262 MB). The OS limit on what a batch adds to its process
(``control.transform.wire.CALL_MEMORY``) ends the process instead: that call fails, alone, and another
account's call in the same pool is answered (ADR 0085). Its error says it was memory, in the words of
transforms.md, where it read only `the transform ended its sandbox process (Fatal JavaScript out of memory:
...)`; a crash V8 calls out of memory that is no failed allocation (a length past its largest array) keeps
the general words."""

from __future__ import annotations

import asyncio
import json

import pytest

from control.transform.pool import Pool
from control.transform.wire import Run
from tests.transform.fatal import FATAL

PAYLOAD = json.dumps({"request": {"method": "POST", "path": "/", "query": "", "headers": {}, "body": 1}, "context": {}})
ECHO = "function handler(r) { return r; }"
ENDED = (
    "stopped: the transform used more memory than its limit (160 MB per batch) and ended its sandbox process "
    "(Fatal JavaScript out of memory: CALL_AND_RETRY_LAST; "
)

LARGE = {
    "one-byte string made flat, 256 MB": '"xy".repeat(2**27).indexOf("z")',
    "two-byte string doubled to 2^27 characters, 256 MB": (
        'let s = "\\u1234b"; for (let i = 0; i < 26; i++) s += s; s.indexOf("z")'
    ),
    "string kept to the return": 'const k = "xy".repeat(2**27); k.indexOf("z"); r.body = k.length',
}


async def _run(pool: Pool, source: str, account: str) -> Run:
    result = await pool.run(source, PAYLOAD, account=account, key=account)
    assert isinstance(result, Run)
    return result


@pytest.mark.parametrize("allocation", LARGE.values(), ids=LARGE.keys())
async def test_one_large_allocation_fails_its_call_alone(pool: Pool, allocation: str) -> None:
    run = await _run(pool, f"function handler(r) {{ {allocation}; return r; }}", "acct_a")
    assert run.error is not None, run
    assert run.error.startswith(ENDED), run.error
    assert run.crashed
    other = await _run(pool, ECHO, "acct_b")  # the same pool, one process: a new one took its place
    assert other.error is None


async def test_another_accounts_calls_meanwhile_are_answered(pool: Pool) -> None:
    """A batch of the other account waiting behind the overrun goes again in the new process."""
    hostile = _run(pool, 'function handler(r) { "xy".repeat(2**27).indexOf("z"); return r; }', "acct_a")
    others = [_run(pool, ECHO + f"\n// {i}", "acct_b") for i in range(3)]
    runs = await asyncio.gather(hostile, *others)
    assert runs[0].error is not None
    assert runs[0].error.startswith(ENDED)
    assert [run.error for run in runs[1:]] == [None, None, None]


async def test_a_length_past_v8s_largest_array_is_no_memory_overrun(pool: Pool) -> None:
    """V8 words its length check "out of memory: invalid array length", though nothing was allocated: a crash."""
    run = await _run(pool, FATAL, "acct_a")
    assert run.crashed
    assert run.error is not None
    assert run.error.startswith(
        "stopped: the transform ended its sandbox process (Fatal JavaScript out of memory: invalid array length"
    ), run.error


async def test_calls_within_the_limits_run_one_after_another(pool: Pool) -> None:
    """64 MB of garbage per call, or about 10 MB kept to the call's end, call after call: never near the limit."""
    garbage = "let a = []; for (let i = 0; i < 2e6; i++) { a.push({i}); if (a.length > 1e5) a = []; }"
    live = 'const a = []; for (let i = 0; i < 1.5e5; i++) a.push({i, s: "v" + i});'
    for body in (garbage, live):
        source = f"function handler(r) {{ {body} return r; }}"
        runs = [await _run(pool, source, "acct_a") for _ in range(10)]
        assert [run.error for run in runs] == [None] * 10, [run.error for run in runs]


async def test_the_trials_dry_run_fails_and_the_next_one_runs(client, account) -> None:
    """The fresh-clone trial's call, on the dry-run route: it answered ``error: null`` in 0.2 s."""
    url = "/v1/transformations/test"
    hostile = f"function handler(r) {{ {LARGE['one-byte string made flat, 256 MB']}; return r; }}"
    first = await client.post(url, json={"transform": hostile, "request": {"body": {}}}, headers=account.headers)
    assert first.status_code == 200, first.text
    assert first.json()["error"]["message"].startswith(ENDED), first.json()
    again = await client.post(url, json={"transform": ECHO, "request": {"body": {}}}, headers=account.headers)
    assert again.json()["error"] is None, again.json()
