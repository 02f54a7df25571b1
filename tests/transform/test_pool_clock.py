"""The pool's clock on a call counts what the sandbox process spent on it, not what the caller or the machine
did meanwhile: a caller's event loop that stalls past the limit, or a process that waits for a core (here
stopped with SIGSTOP, the extreme of waiting), does not turn a finished call into "still running after 1 s";
a call that really runs on (a builtin that ignores V8's termination), or a process that never answers, is
still killed, within a bound. Real sandbox processes throughout (ADR 0050, amended 2026-12-03)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

from control.transform.pool import Pool
from control.transform.process import HARD_S, Process
from control.transform.wire import TIME_LIMIT_S, Run

ECHO = "function handler(r) { return r; }"
SPIN = "function handler(r) { const t = Date.now(); while (Date.now() - t < r.body) {} return r; }"
"""Runs ``body`` ms by the clock: a call that is mid-V8 when its process is stopped."""
FILL = "function handler(r) { new Array(1e8).fill(1.5); return null; }"
"""A builtin that does not look at V8's termination requests: only the pool's kill ends it."""
STUCK = "stopped: still running after 1 s"


def _payload(body: int) -> str:
    return json.dumps({"request": {"method": "POST", "path": "/", "query": "", "headers": {}, "body": body}})


async def _run(pool: Pool, source: str, body: int = 1) -> Run:
    result = await pool.run(source, _payload(body), account="acct_a", key="k")
    assert isinstance(result, Run)
    return result


async def _warm(pool: Pool, source: str) -> Process:
    """The pool's one process, up, with ``source`` compiled in it."""
    assert (await _run(pool, source)).error is None
    (process,) = pool._idle
    return process


async def _sent(process: Process) -> None:
    """Until the pool has written a batch to the process."""
    while not process.depth:
        await asyncio.sleep(0)


async def test_a_caller_whose_event_loop_stalls_past_the_limit_gets_its_answer(pool: Pool) -> None:
    """The answer is in the pipe when the stalled loop wakes, together with the clock that ran out meanwhile;
    before, the clock's callback ran first and killed the process that had answered."""
    process = await _warm(pool, ECHO)
    call = asyncio.create_task(_run(pool, ECHO, body=7))
    await _sent(process)
    time.sleep(TIME_LIMIT_S + 1.0)  # the caller's loop blocked: what a loaded or busy caller does
    run = await call
    assert (run.error, run.stopped, run.request and run.request["body"]) == (None, False, 7)
    assert process.alive
    assert pool._idle == [process]


async def test_a_process_that_waits_for_a_core_past_the_limit_is_not_killed(pool: Pool) -> None:
    """Stopped before the batch reached it and continued 2 s later: it spent no CPU on the call meanwhile."""
    process = await _warm(pool, ECHO)
    assert process.proc is not None
    os.kill(process.proc.pid, signal.SIGSTOP)
    try:
        call = asyncio.create_task(_run(pool, ECHO, body=8))
        await asyncio.sleep(TIME_LIMIT_S + 1.0)
        assert not call.done()
    finally:
        os.kill(process.proc.pid, signal.SIGCONT)
    run = await call
    assert (run.error, run.request and run.request["body"]) == (None, 8)
    assert pool._idle == [process]


async def test_a_process_stopped_mid_call_finishes_it_when_continued(pool: Pool) -> None:
    """Stopped while V8 runs the call (0.4 s by the clock, 0.15 s of it done): the process's own stop at the
    limit counts its CPU too, so on waking it lets the call finish rather than stop it."""
    process = await _warm(pool, SPIN)
    assert process.proc is not None
    call = asyncio.create_task(_run(pool, SPIN, body=400))
    await _sent(process)
    await asyncio.sleep(0.15)
    os.kill(process.proc.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(TIME_LIMIT_S + 1.0)
    finally:
        os.kill(process.proc.pid, signal.SIGCONT)
    run = await call
    assert (run.error, run.request and run.request["body"]) == (None, 400)
    assert pool._idle == [process]


async def test_a_builtin_that_ignores_termination_is_still_killed_at_its_cpu_limit(pool: Pool) -> None:
    """With the answers' pipe past descriptor 1024, as in a busy control plane: the look for an answer on its
    way must not take an unpollable descriptor for one (``select.select`` refuses it)."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        process = await _warm(pool, ECHO)
    finally:
        for fd in held:
            os.close(fd)
    assert process._stdout_fd is not None
    assert process._stdout_fd > 1024
    started = time.perf_counter()
    run = await _run(pool, FILL)
    took = time.perf_counter() - started
    assert (run.error, run.stopped, run.crashed) == (STUCK, True, False)
    assert not process.alive
    assert took < HARD_S + 1.0, took
    assert (await _run(pool, ECHO)).error is None  # a new process took its place


async def test_a_process_that_never_answers_is_killed_at_the_hard_bound(pool: Pool) -> None:
    """Stopped for good: it spends no CPU, so only the wall-clock bound (``HARD_S``) ends it."""
    process = await _warm(pool, ECHO)
    assert process.proc is not None
    os.kill(process.proc.pid, signal.SIGSTOP)
    started = time.perf_counter()
    run = await _run(pool, ECHO)
    took = time.perf_counter() - started
    assert (run.error, run.stopped) == (STUCK, True)
    assert HARD_S - 0.1 <= took < HARD_S + 1.0, took
    assert not process.alive
