"""The sandbox processes a control plane or a worker runs transforms in: V8 never runs in their own process.

A ``Pool`` starts up to ``size`` sandbox processes (``control.transform.child``; the machine's cores by
default, ``HOOKYARD_SANDBOX_PROCESSES``) as calls need them and keeps them. A call is a frame on a
process's stdin and an answer on its stdout: the caller's event loop only awaits a pipe. Calls of one
account and one transform that wait together go as one batch; a process holds one account's batches at a
time, up to ``PIPELINE`` of them written ahead (``control.transform.process``), and runs them one at a
time, so what kills it fails only the batch it was running (those behind it go again, never started), and
a batch that failed so is run again call by call, each in a process of its own: only the call that ended
its process fails.

- Time: V8 stops a call at ``TIME_LIMIT_S`` (``TerminateExecution``); a process that has not answered and
  has spent ``TIME_LIMIT_S`` + ``GRACE_S`` of CPU on it (a builtin such as ``Array.prototype.fill`` does not
  look at termination requests), or after ``HARD_S`` whatever it spent, is killed, and the call fails with
  ``stopped: still running after 1 s``. A stalled caller or a process waiting for a core is not the call's
  time (``control.transform.process``).
- Memory: V8's heap limit in each isolate, and under it the process's OS limit (``RLIMIT_DATA``,
  ``HOOKYARD_SANDBOX_MEMORY_MB``); a process that dies of either, of a V8 fatal error or of a signal fails
  its call with ``crashed`` set, and the next call starts a new process.
- Fair shares: calls wait in a queue per account, served round robin, and no account has more than
  ``per_account`` processes at once (``HOOKYARD_SANDBOX_PER_ACCOUNT``; half the pool by default), so
  another account always finds one. A ``key`` (a destination) whose calls keep being stopped by a limit
  waits before each next call, longer each time (``_Strikes``): its own calls slow down, not others'.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from control.transform.process import GRACE_S, PIPELINE, Process
from control.transform.wire import Answer, Call, Input, Problem, Run
from shared.errors import SandboxEndedError
from shared.settings import Settings

__all__ = ("GRACE_S", "MAX_BATCH", "Pool", "close_pool", "pool_for")

MAX_BATCH = 64
"""Calls of one transform sent to a process at once (those of an account that waited meanwhile)."""
STRIKES_FREE = 2
"""Calls of a key stopped by a limit in a row before its next calls wait."""
MAX_WAIT_S = 20.0
"""How long a call may wait for its account's turn: a worker's lease on the task outlives it (60 s). One
written behind a running batch (``PIPELINE``) may wait that batch's limit more."""
BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0


@dataclass(slots=True)
class _Job:
    """Calls of one transform that wait and settle together: one delivery's, or a claim's group of them
    (``Pool.run_many``), with one future and one timer for all."""

    source: str
    payloads: list[str | Input]
    done: asyncio.Future[list[Run | Problem]]
    since: float
    """When it was queued (the loop's clock)."""
    started: bool = False


class _Strikes:
    """Calls of a key stopped by a limit in a row, for the last ``_KEYS`` keys that had any."""

    _KEYS = 4096

    def __init__(self) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()

    def wait_s(self, key: str) -> float:
        over = self._counts.get(key, 0) - STRIKES_FREE
        return 0.0 if over < 0 else min(BACKOFF_S * 2**over, MAX_BACKOFF_S)

    def note(self, key: str, stopped: bool) -> None:
        if not stopped:
            self._counts.pop(key, None)
            return
        self._counts[key] = self._counts.get(key, 0) + 1
        self._counts.move_to_end(key)
        while len(self._counts) > self._KEYS:
            self._counts.popitem(last=False)


class Pool:
    def __init__(self, size: int = 0, per_account: int = 0, memory_mb: int = 1536) -> None:
        self.size = size or os.cpu_count() or 1
        self.per_account = per_account or max(1, self.size // 2)
        self.memory_mb = memory_mb
        self._waiting: OrderedDict[str, deque[_Job]] = OrderedDict()
        self._held: dict[str, list[Process]] = {}
        """The processes each account holds: those with its batches sent and not yet answered."""
        self._running = 0
        self._idle: list[Process] = []
        self._every: weakref.WeakSet[Process] = weakref.WeakSet()
        """Every process made and not yet collected: ``close`` ends them all, also one whose kill was a task it
        cancelled, or one neither idle nor held (a dedicated run's), which would outlive the pool."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._strikes = _Strikes()
        self._closed = False
        self._pumping = False
        """A ``_pump`` is due on the event loop's next turn (``_pump_soon``)."""

    async def run(self, source: str, payload: str | Input, *, account: str, key: str) -> Run | Problem:
        """One call of ``source``'s ``handler`` on the JSON ``payload``, or on a request (``Input``, mapped in
        the sandbox process: ``control.transform.apply``); a ``Problem`` when it does not compile. Never
        raises for what the code does."""
        return (await self.run_many(source, [payload], account=account, key=key))[0]

    async def run_many(
        self, source: str, payloads: list[str | Input], *, account: str, key: str
    ) -> list[Run | Problem]:
        """``run`` of each payload, in order, as one job: one future, one timer and one place in the account's
        queue for all of them (a claim's deliveries to one destination: ``control.delivery.transforms``). They go
        in one batch when they fit (``MAX_BATCH``), wait for their turn together (``MAX_WAIT_S``), and a batch
        that ends its process is still run again call by call: only the guilty call fails."""
        wait_s = self._strikes.wait_s(key)
        if wait_s:
            await asyncio.sleep(wait_s)
        loop = asyncio.get_running_loop()
        job = _Job(source, payloads, loop.create_future(), loop.time())
        self._waiting.setdefault(account, deque()).append(job)
        if not self._pumping:  # the calls made in this turn of the loop go as one batch
            self._pumping = True
            loop.call_soon(self._pump_soon)
        timer = loop.call_later(MAX_WAIT_S, _give_up, job)  # one timer, not a timeout and a shield per call
        try:
            results = await job.done  # cancelled with its caller: skipped when its turn comes, or its result dropped
        finally:
            timer.cancel()
        # a call that never ran (``unrun``) says nothing of the key's code: it neither strikes nor clears
        stopped = [isinstance(r, Run) and r.stopped for r in results if not getattr(r, "unrun", False)]
        if any(stopped):
            for one in stopped:
                self._strikes.note(key, one)
        elif stopped:  # none stopped (nearly always): the key's strikes end once, not once per call
            self._strikes.note(key, False)
        return results

    def wait_s(self, key: str) -> float:
        """How long the key's next call waits before it runs (0: it does not), after its calls' stops."""
        return self._strikes.wait_s(key)

    def forgive(self, key: str) -> None:
        """The key's stops are forgotten: the code they were for was replaced (a caller's call, not a limit's)."""
        self._strikes.note(key, False)

    async def check(self, source: str, *, account: str) -> Problem | None:
        """Why ``source`` is not a transform (it must compile, and loading it must define ``handler``)."""
        result = await self.run(source, '{"check": true}', account=account, key="check:" + account)
        if isinstance(result, Problem):
            return result
        return None if result.error is None else Problem(result.error, result.line)

    def _where(self, account: str) -> Process | Literal[False] | None:
        """Where the account's next batch goes: a process of its own taken now (an idle one, or a new one),
        one it holds with room in its pipeline, or False (it has its share, or the pool is full)."""
        held = self._held.get(account, ())
        if len(held) < self.per_account and self._running < self.size:
            while self._idle:
                process = self._idle.pop()
                if process.alive:
                    return process
                self._spawn(process.kill(), "sandbox:kill")  # died idle (killed from outside): no one's fault
            return None
        return next((p for p in held if p.depth < PIPELINE and p.alive), False)

    def _next(self) -> tuple[str, list[_Job], Process] | None:
        """The next account's turn (round robin among those with room), its batch and its process."""
        for account, jobs in list(self._waiting.items()):
            while jobs and jobs[0].done.done():  # gave up waiting, or cancelled with their callers
                jobs.popleft()
            if not jobs:
                del self._waiting[account]
        for account in self._waiting:
            where = self._where(account)
            if where is not False:
                break
        else:
            return None
        if where is None:
            where = Process(self.memory_mb)
            self._every.add(where)
        if where not in self._held.get(account, ()):
            self._held.setdefault(account, []).append(where)
            self._running += 1
        jobs = self._waiting[account]
        first = jobs.popleft()
        batch, rest = [first], deque[_Job]()
        calls = len(first.payloads)
        while jobs:
            job = jobs.popleft()
            if job.source == first.source and calls + len(job.payloads) <= MAX_BATCH:
                batch.append(job)
                calls += len(job.payloads)
            else:
                rest.append(job)
        if rest:
            self._waiting[account] = rest
            self._waiting.move_to_end(account)
        else:
            del self._waiting[account]
        return account, [first, *(job for job in batch[1:] if not job.done.done())], where

    def _pump_soon(self) -> None:
        """The pump of the calls made in one turn of the event loop, run at the start of the next: a claim's
        deliveries start together and reach ``run`` in the same turn, and pumping at each call sent the first
        one or two alone (a process with room takes a batch at once) and the rest as the next batch. One
        write, one wakeup of the sandbox process and one answer per batch are most of what a call costs the
        caller's process beyond the call itself (ADR 0060)."""
        self._pumping = False
        self._pump()

    def _pump(self) -> None:
        while not self._closed:
            turn = self._next()
            if turn is None:
                return
            account, batch, process = turn
            for job in batch:
                job.started = True
            process.depth += 1
            if process.started:  # written now, settled in the turn that reads its answer (``_answered``)
                clock = time.perf_counter()
                call = Call(account=account, source=batch[0].source, payloads=_payloads(batch))
                process.submit(call, partial(self._answered, account, batch, process, clock))
            else:  # a new process: its batches wait for its pipes in a task
                self._spawn(self._dispatch(account, batch, process))

    def _spawn(self, work: Coroutine[Any, Any, None], name: str = "sandbox:call") -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _release(self, account: str, process: Process) -> None:
        """The account is done with the process (nothing of its in flight, or it died): idle, or ended."""
        held = self._held.get(account, [])
        if process not in held or (process.depth and process.alive):
            return
        held.remove(process)
        if not held:
            del self._held[account]
        self._running -= 1
        if process.alive and not self._closed and len(self._idle) < self.size:
            self._idle.append(process)
        else:
            self._spawn(process.kill(), "sandbox:kill")

    def _answered(
        self, account: str, batch: list[_Job], process: Process, clock: float, result: Answer | SandboxEndedError
    ) -> None:
        """A batch ``submit`` wrote is answered, or failed: its calls get their results at once, and the
        process its next batch (``_pump``). One that ended its process is run again call by call in a task
        (``_again``), which keeps the process counted in the account's share until then."""
        if isinstance(result, SandboxEndedError) and not result.innocent and _calls(batch) > 1 and not self._closed:
            self._spawn(self._again(account, batch, process))
            return
        try:
            results = (
                None
                if isinstance(result, SandboxEndedError) and (result.innocent or self._closed)
                else _results(result, batch, process, clock)
            )
        finally:
            self._release(account, process)
        self._settle(account, batch, results)

    async def _again(self, account: str, batch: list[_Job], process: Process) -> None:
        """Each call of a batch that ended its process, alone in a process of its own: only the guilty call
        fails."""
        try:
            results: list[list[Run | Problem]] | None = [
                [await self._alone(account, job.source, payload) for payload in job.payloads] for job in batch
            ]
        except BaseException as exc:
            _fail(batch, exc)
            raise
        finally:
            self._release(account, process)
            self._pump()
        self._settle(account, batch, results)

    def _settle(self, account: str, batch: list[_Job], results: list[list[Run | Problem]] | None) -> None:
        """The batch's calls get their results; None: it never began, and goes back to the head of its
        account's queue, within its bound. Then whatever can go next goes."""
        if results is None and self._closed:  # nothing runs any more (``close``)
            for job in batch:
                _stop(job, _CLOSED)
            return
        if results is None:
            now = asyncio.get_running_loop().time()
            for job in batch:
                job.started = False
                if now - job.since >= MAX_WAIT_S:
                    _give_up(job)
            self._waiting.setdefault(account, deque()).extendleft(reversed(batch))
        else:
            for job, result in zip(batch, results, strict=True):
                if not job.done.done():
                    job.done.set_result(result)
        self._pump()

    async def _dispatch(self, account: str, batch: list[_Job], process: Process) -> None:
        """A batch for a process whose pipes are not there yet: it waits for them in this task."""
        try:
            results = await self._execute(account, batch, process)
        except BaseException as exc:
            _fail(batch, exc)
            self._release(account, process)
            self._pump()
            raise
        self._release(account, process)
        self._settle(account, batch, results)

    async def _execute(self, account: str, batch: list[_Job], process: Process) -> list[list[Run | Problem]] | None:
        """The batch's results, or None when it never began (it waited behind a batch that ended the
        process). A batch that ended its process is run again call by call, each in a process of its own."""
        clock = time.perf_counter()
        try:
            call = Call(account=account, source=batch[0].source, payloads=_payloads(batch))
            answer: Answer | SandboxEndedError = await process.call(call)
        except SandboxEndedError as ended:
            if ended.innocent or self._closed:
                return None
            if _calls(batch) > 1:  # which call did it: each again alone
                return [[await self._alone(account, job.source, p) for p in job.payloads] for job in batch]
            answer = ended
        return _results(answer, batch, process, clock)

    async def _alone(self, account: str, source: str, payload: str | Input) -> Run | Problem:
        """One call of a batch that ended its process, in a new process of its own (the slot of the one
        that ended)."""
        process = Process(self.memory_mb)
        self._every.add(process)
        process.depth += 1
        loop = asyncio.get_running_loop()
        job = _Job(source, [payload], loop.create_future(), loop.time(), started=True)
        try:
            results = await self._execute(account, [job], process)
        finally:
            self._spawn(process.kill(), "sandbox:kill")
        assert results is not None  # alone in its process: nothing ran before it
        return results[0][0]

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Ends every process, and returns once every task the pool started is done, those started while it
        closed too (a process released by a cancelled call is killed in a task of its own): a task left
        pending when its event loop closed was destroyed with it ("Task was destroyed but it is pending", the
        process's pipes unclosed). Calls waiting for their turn, or whose batch the close ended, are stopped;
        nothing runs again after it (a batch ended so is not run call by call in new processes)."""
        self._closed = True
        for jobs in self._waiting.values():
            for job in jobs:
                _stop(job, _CLOSED)
        self._waiting.clear()
        for task in list(self._tasks):
            if task.get_name() != "sandbox:kill":  # a kill runs to its end: its process is reaped, its pipes closed
                task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._idle, self._held = [], {}
        await asyncio.gather(*(process.kill() for process in list(self._every)), return_exceptions=True)
        while self._tasks:  # the kills the cancelled calls and the processes' ends started meanwhile
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _payloads(batch: list[_Job]) -> list[str | Input]:
    return [payload for job in batch for payload in job.payloads]


def _calls(batch: list[_Job]) -> int:
    return sum(len(job.payloads) for job in batch)


def _results(
    answer: Answer | SandboxEndedError, batch: list[_Job], process: Process, clock: float
) -> list[list[Run | Problem]]:
    """The results of a batch's calls from its answer, per job, or from the error of a call that ended its
    process alone (measured from when it began there, ``Process.began``, else from ``clock``)."""
    if isinstance(answer, SandboxEndedError):
        ms = (time.perf_counter() - (process.began or clock)) * 1000
        return [[Run(error=answer.message, stopped=True, crashed=answer.crashed, duration_ms=ms)]]
    if answer.problem is not None:
        problem = Problem(answer.problem, answer.line)
        return [[problem] * len(job.payloads) for job in batch]
    runs = answer.runs
    assert runs is not None
    assert len(runs) == _calls(batch)
    if len(batch) == 1:
        return [list(runs)]
    out: list[list[Run | Problem]] = []
    at = 0
    for job in batch:
        out.append(list(runs[at : at + len(job.payloads)]))
        at += len(job.payloads)
    return out


def _fail(batch: list[_Job], exc: BaseException) -> None:
    for job in batch:
        if not job.done.done():
            job.done.set_exception(exc)


def _give_up(job: _Job) -> None:
    """A call still waiting for its account's turn after ``MAX_WAIT_S`` fails (left in its queue, skipped);
    one that runs is ended by its own limits."""
    if not job.started:
        _stop(job, f"stopped: waited {MAX_WAIT_S:g} s for a sandbox process (this account's other calls held them)")


_CLOSED = "stopped: the sandbox pool closed"


def _stop(job: _Job, why: str) -> None:
    """The job's calls fail unrun (``Run.unrun``: not their code's doing), with ``why``."""
    if not job.done.done():
        ms = (asyncio.get_running_loop().time() - job.since) * 1000
        job.done.set_result([Run(error=why, stopped=True, duration_ms=ms, unrun=True) for _ in job.payloads])


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool] = weakref.WeakKeyDictionary()


def pool_for(settings: Settings) -> Pool:
    """This event loop's pool (a process's control plane or worker has one), made on first use."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None or pool.closed:
        pool = Pool(settings.sandbox_processes, settings.sandbox_per_account, settings.sandbox_memory_mb)
        _POOLS[loop] = pool
    return pool


async def close_pool() -> None:
    """Ends this event loop's sandbox processes (at a process's shutdown)."""
    pool = _POOLS.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.close()
