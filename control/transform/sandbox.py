"""One transform's code in a V8 isolate of its own (mini-racer), compiled once and called per delivery.
Runs only in a sandbox process (``control.transform.child``), never in the control plane or a worker.

An isolate per compiled transform: its heap limit is the transform's alone, a runaway call stops only its
own transform's calls, and no two transforms (or accounts) share a heap. Each isolate has its own thread
(mini-racer's message pump); a call is handed to it and awaited (``run_many``), or, in a sandbox process, which
has nothing else to do meanwhile, waited for on the calling thread (``run_now``).

Limits of one call: ``TIME_LIMIT_S`` of wall time (then V8's ``TerminateExecution``; in a sandbox process,
``run_now``, not counting what the process was stalled, within ``WALL_LIMIT_S``), ``MEMORY_LIMIT`` of
V8 heap (mini-racer's hard limit, checked after every garbage collection; memory outside the heap cannot
be reached, ``control.transform.prelude``), ``MAX_OUTPUT`` characters of returned request and
``MAX_LOGS`` of ``console`` output. A call that was stopped (time, memory) leaves its isolate behind: it is
closed, and the next call compiles the source again in a new one.

Promise jobs run after a call returns (V8 drains microtasks between tasks), outside the call's timer: code
can leave ``(async () => { await 0; for (;;); })()`` behind. Every call is timed, so the next call of the
transform stops such an isolate; and ``TIME_LIMIT_S`` after the last call, when no call came since, a fence
(``0``) is sent under the same time limit, and an isolate still busy then is closed. So leftover work runs
for at most twice the limit, and a steady stream of calls costs no fences.

Calls that wait while a batch runs go together as the next one (``run``). A batch is one task on the
isolate's thread: the inputs are the ``this`` of a function compiled once (``RUNNER``), and the argument
array is made once. mini-racer's public ``call_function_cancelable`` makes a
new argument array on every call, a blocking round trip to the isolate's thread before the call's own; the
call here goes through the same method of its ``Context`` that the public one ends in
(``_run_cancelable_mr_task``), pinned to mini-racer 0.14 in pyproject.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import time
from collections.abc import Callable

import msgspec
from py_mini_racer import JSEvalException, JSFunction, JSOOMException, JSParseException, MiniRacer
from py_mini_racer._context import Context
from py_mini_racer._value_handle import ValueHandle

from control.transform.prelude import LINE_OFFSET, PRELUDE, RUNNER, body, script
from control.transform.wire import (
    MAX_LOGS,
    MAX_OUTPUT,
    MAX_SOURCE,
    MEMORY_LIMIT,
    TIME_LIMIT_S,
    WALL_LIMIT_S,
    Problem,
    Run,
    checked,
    share_batch_time,
)
from shared.json_depth import MAX_DEPTH

__all__ = (
    "MAX_LOGS",
    "MAX_OUTPUT",
    "MAX_SOURCE",
    "MEMORY_LIMIT",
    "TIME_LIMIT_S",
    "Problem",
    "Run",
    "Sandbox",
    "check",
)

LATE_S = 0.1
"""How late a sandbox process's clock may wake for a call's deadline before it counts as stalled (``_stalled``)."""
MAX_BATCH = 64
"""Calls of one transform sent to its isolate at once (those that waited while the previous batch ran)."""

_LINE = re.compile(r"(?:<anonymous>|transform\.js):(\d+)")
_decode = msgspec.json.Decoder().decode
_decode_runs = msgspec.json.Decoder(list[Run]).decode
_ANSWER_QUEUED = 0
"""mini-racer's callback id whose answers go on its context's queue (``_UNCANCELABLE_TASK_CALLBACK_ID``)."""


def _loose(answer: str) -> list[Run]:
    """The runs of an answer that does not decode into ``Run``s: a returned request that is not an object is
    kept as it is (for the caller to refuse), and one with a lone surrogate (which msgspec refuses) is decoded
    by ``json`` and each run checked."""
    try:
        outs, valid = _decode(answer), True
    except msgspec.DecodeError:
        outs, valid = json.loads(answer), False
    runs = [Run(request=o[0], error=o[1], line=o[2], logs=o[3], logs_truncated=o[4], duration_ms=o[5]) for o in outs]
    return runs if valid else [checked(run) for run in runs]


class _Refused(Exception):
    """The constructor's way out, turned into a ``Problem`` by ``Sandbox.compile``."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _stalled(deadline: float, clock: float) -> tuple[float, float]:
    """A call's new deadline when this thread woke late for its old one (``time.perf_counter``), and the wait
    until then: as long again as it was late, which the process was stalled at least (stopped, or unable to
    run at all), and which is not the call's time. Woken within ``LATE_S`` (a busy machine's usual delay), or
    past ``WALL_LIMIT_S`` since the call began (``clock``): no wait (0), it is stopped. Without this, a call
    of a process stalled past its deadline was "still running after 1 s" when it had barely begun (ADR
    0050, amended 2026-12-03)."""
    now = time.perf_counter()
    late = now - deadline
    if late < LATE_S or now - clock >= WALL_LIMIT_S:
        return deadline, 0.0
    return now + late, min(late, WALL_LIMIT_S - (now - clock))


def _first_line(text: str) -> str:
    """V8's ``<anonymous>:3: SyntaxError: Unexpected token '}'`` → ``SyntaxError: Unexpected token '}'``."""
    for line in text.splitlines():
        line = line.strip()
        if "Error" in line:
            return re.sub(r"^(?:<anonymous>|transform\.js):\d+:\s*", "", line)
    return text.strip().splitlines()[0] if text.strip() else "does not compile"


_WRAPPER_PAREN = "SyntaxError: Unexpected token ')'"
_UNCLOSED_BLOCK = "SyntaxError: Unexpected end of input (a { is not closed)"


def _syntax_error(mr: MiniRacer, source: str, exc: Exception) -> Problem:
    """Where the Function constructor refused the source: its line, from compiling it as a script (never
    run). A source that compiles as a script but not as a function body closed the function early."""
    try:
        mr.eval(script(source))
    except JSParseException as parsed:
        match = _LINE.search(str(parsed))
        last = source.count("\n") + 1  # an error at the wrapper's closing line is one at the source's end
        message = _first_line(str(parsed))
        if match and int(match.group(1)) > last and message == _WRAPPER_PAREN:
            # the wrapper's `}` closed a block of the source, and its `)` was what V8 stumbled on: a character
            # the author never wrote; what they see is a source that ends with a block still open
            message = _UNCLOSED_BLOCK
        return Problem(message, min(int(match.group(1)), last) if match else None)
    except JSEvalException:
        pass
    return Problem(_first_line(str(exc)) + " (the source must be the body of a script, not close it)", None)


class Sandbox:
    """A transform's source compiled in its own isolate; ``run`` calls ``handler`` once per input. Made by
    ``Sandbox.compile``."""

    @classmethod
    def compile(cls, source: str) -> Sandbox | Problem:
        """The source compiled in a new isolate, or why it does not compile (nothing is run yet)."""
        try:
            return cls(source)
        except _Refused as refused:
            return refused.problem

    def __init__(self, source: str) -> None:
        if len(source) > MAX_SOURCE:
            raise _Refused(Problem(f"longer than {MAX_SOURCE} characters", None))
        self.source = source
        self._lock = asyncio.Lock()
        self._queue: list[tuple[list[str], list[str], asyncio.Future[list[Run]]]] = []
        self._pump: asyncio.Task[None] | None = None
        self._fence: asyncio.Task[None] | None = None
        self._fence_timer: asyncio.TimerHandle | None = None
        self._last_call = 0.0
        self._retired = False
        self._mr: MiniRacer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._call: tuple[Context, ValueHandle, ValueHandle] | None = None
        """mini-racer's context, the runner and the argument array, as ``_batch`` calls them."""
        self.alone: Callable[[], None] | None = None
        """Called before each call of a stopped batch runs again alone: a sandbox process tells the pool so
        (``control.transform.child``), whose clock on the batch then starts over for that call. Without it,
        the pool's clock, begun with the batch, ran out during the first call run alone: the process was
        killed, and every call of the batch ran again in a process of its own (issue 42)."""
        self._build()

    def _build(self) -> None:
        """A new isolate: the prelude, the source compiled as the factory (``_Refused`` when it does not
        compile), and the runner around it. Blocks for a few milliseconds: once per transform version."""
        mr = MiniRacer()
        try:
            mr.set_hard_memory_limit(MEMORY_LIMIT)
            mr.eval(PRELUDE)
            try:
                factory = mr.eval(f"Function('console', {json.dumps(body(self.source))})")
            except JSEvalException as exc:
                raise _Refused(_syntax_error(mr, self.source, exc)) from None
            make_runner = mr.eval(RUNNER)
            assert isinstance(make_runner, JSFunction)  # RUNNER is a function expression
            runner = make_runner(factory, MAX_OUTPUT, MAX_LOGS, LINE_OFFSET, MAX_DEPTH)
            ctx = mr._ctx
            assert ctx is not None
            self._call = (
                ctx,
                ctx._python_to_value_handle(runner),
                ctx._python_to_value_handle(mr.eval("[]")),
            )
        except BaseException:
            mr.close()
            raise
        self._mr, self._loop = mr, asyncio.get_running_loop()

    def close(self) -> None:
        """Stops whatever runs in the isolate and frees it (its thread joins)."""
        mr, self._mr, self._call = self._mr, None, None
        fence, self._fence = self._fence, None
        if self._fence_timer is not None:
            self._fence_timer.cancel()
            self._fence_timer = None
        if fence is not None and fence is not asyncio.current_task():
            fence.cancel()
        if mr is not None:
            mr.close()

    def retire(self) -> None:
        """Closes the isolate once no call runs or waits (a newer version replaced this one, or a cache let
        it go): a delivery that already began with it finishes with it."""
        self._retired = True
        if not self._lock.locked() and not self._queue:
            self.close()

    @property
    def closed(self) -> bool:
        return self._mr is None

    async def run(self, payload: str) -> Run:
        """Calls ``handler`` with the JSON ``payload`` ``{"request", "context"}`` within the limits. Never
        raises for what the code does: a throw, a bad return, a limit reached are a ``Run`` with ``error``."""
        return (await self.run_many([payload]))[0]

    async def run_many(self, payloads: list[str], bodies: list[str] | None = None) -> list[Run]:
        """``run`` for each payload, in order, as one entry of the queue: a sandbox process hands over the
        batch the pool sent without a future and a task per call. ``bodies``: each payload's request body as
        text (``control.transform.apply.payload_of``; "" for a payload without one), handed to V8 as it is,
        beside the payloads' JSON, not inside it.

        Calls that arrive while a batch runs wait and go as the next batch, one task on the isolate's thread
        (group commit): each round trip to that thread costs a thread hop and, on the way back, the GIL, which
        a busy event loop hands over only every switch interval (5 ms). One transform's calls at a time, so
        the limits are each batch's; a batch that was stopped is run again call by call, each within the
        limits alone, so only the call that ran away is stopped."""
        waiter: asyncio.Future[list[Run]] = asyncio.get_running_loop().create_future()
        self._queue.append((payloads, bodies or [""] * len(payloads), waiter))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._drain(), name="transform:calls")
        return await waiter

    def _take(self) -> list[tuple[list[str], list[str], asyncio.Future[list[Run]]]]:
        """The next batch: entries from the head of the queue up to ``MAX_BATCH`` calls (at least one entry),
        those cancelled meanwhile left out."""
        taken: list[tuple[list[str], list[str], asyncio.Future[list[Run]]]] = []
        calls = 0
        while self._queue and (not taken or calls + len(self._queue[0][0]) <= MAX_BATCH):
            payloads, bodies, waiter = self._queue.pop(0)
            if not waiter.done():
                taken.append((payloads, bodies, waiter))
                calls += len(payloads)
        return taken

    async def _drain(self) -> None:
        while self._queue:
            batch = self._take()
            if not batch:
                continue
            payloads = [payload for entry, _, _ in batch for payload in entry]
            bodies = [body for _, entry, _ in batch for body in entry]
            try:
                async with self._lock:
                    runs = await self._batch(payloads, bodies)
                    if len(payloads) > 1 and any(run.stopped for run in runs):
                        runs = []
                        for one, body in zip(payloads, bodies, strict=True):
                            self._going_alone()
                            runs += await self._batch([one], [body])
            except BaseException as exc:
                for _, _, waiter in batch:
                    if not waiter.done():
                        waiter.set_exception(exc)
                raise
            at = 0
            for entry, _, waiter in batch:
                if not waiter.done():
                    waiter.set_result(runs[at : at + len(entry)])
                at += len(entry)
            self._last_call = time.monotonic()
        if self._retired:
            self.close()
        elif not self.closed and self._fence_timer is None:
            self._fence_timer = asyncio.get_running_loop().call_later(TIME_LIMIT_S, self._fence_due)

    def run_now(self, payloads: list[str], bodies: list[str]) -> list[Run] | None:
        """``run_many`` without the event loop, for a sandbox process, which has nothing else to do while its
        batch runs: the calling thread waits for the isolate's answer itself (``_batch_now``); None when a
        batch or a fence holds the isolate now (then ``run_many``). The asyncio path cost ~2 µs of CPU per
        call of a 54-call batch (a future, a task, the lock, a timeout, and the isolate's thread waking the
        loop through its self-pipe): an eighth of a trivial call in the sandbox process (ADR 0060)."""
        if self._lock.locked() or self._queue:
            return None
        runs = self._batch_now(payloads, bodies)
        if len(payloads) > 1 and any(run.stopped for run in runs):
            runs = []
            for one, body in zip(payloads, bodies, strict=True):
                self._going_alone()
                runs += self._batch_now([one], [body])
        self._last_call = time.monotonic()
        if self._retired:
            self.close()
        elif not self.closed and self._fence_timer is None:
            self._fence_timer = asyncio.get_running_loop().call_later(TIME_LIMIT_S, self._fence_due)
        return runs

    def _going_alone(self) -> None:
        if self.alone is not None:
            self.alone()

    def _prepared(self) -> tuple[Context, ValueHandle, ValueHandle]:
        if self._mr is None or self._loop is not asyncio.get_running_loop():
            self.close()
            self._build()  # it compiled before, so it compiles again
        assert self._call is not None  # set with the isolate by _build
        return self._call

    @staticmethod
    def _this(payloads: list[str], bodies: list[str]) -> str:
        """The runner's ``this``: the bodies' length in UTF-16 units, the bodies, then the inputs' JSON."""
        text = "".join(bodies)
        size = len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2
        return f"{size:010d}{text}[{','.join(payloads)}]"

    def _batch_now(self, payloads: list[str], bodies: list[str]) -> list[Run]:
        """``_batch`` waited for on this thread: the task goes to the isolate's thread with mini-racer's
        uncancelable callback (its answer put on a queue, no event loop involved), and a task still running
        after ``TIME_LIMIT_S`` is cancelled (V8's ``TerminateExecution``) and its isolate closed, as
        ``_batch`` does."""
        ctx, runner, argv = self._prepared()
        clock = time.perf_counter()
        this = ctx._python_to_value_handle(self._this(payloads, bodies))
        task = ctx._dll.mr_call_function(ctx._ctx, runner.raw, this.raw, argv.raw, _ANSWER_QUEUED)
        deadline = time.perf_counter() + TIME_LIMIT_S
        wait = TIME_LIMIT_S
        while True:
            try:
                handle = ctx._non_cancelable_mr_task_results_queue.get(timeout=wait)
                break
            except queue.Empty:
                deadline, wait = _stalled(deadline, clock)
                if wait > 0:  # this process was stopped or starved meanwhile: not the call's time
                    continue
                ctx._dll.mr_cancel_task(ctx._ctx, task)
                self.close()
                return self._stopped(payloads, clock, f"stopped: still running after {TIME_LIMIT_S:g} s")
        try:
            answer = ctx._value_handle_to_python(handle)
        except JSEvalException as exc:
            return self._terminated(payloads, clock, exc)
        return self._runs_of(answer, payloads, clock)

    async def _batch(self, payloads: list[str], bodies: list[str]) -> list[Run]:
        """One task on the isolate's thread: the calls in order; all stopped if a limit stopped the task."""
        ctx, runner, argv = self._prepared()
        clock = time.perf_counter()
        try:
            async with asyncio.timeout(TIME_LIMIT_S):
                this = ctx._python_to_value_handle(self._this(payloads, bodies))
                answer = await ctx._run_cancelable_mr_task(ctx._dll.mr_call_function, runner.raw, this.raw, argv.raw)
        except TimeoutError:
            self.close()
            return self._stopped(payloads, clock, f"stopped: still running after {TIME_LIMIT_S:g} s")
        except JSEvalException as exc:  # the runner catches what the code throws: this is a termination
            return self._terminated(payloads, clock, exc)
        return self._runs_of(answer, payloads, clock)

    def _terminated(self, payloads: list[str], clock: float, exc: JSEvalException) -> list[Run]:
        memory = isinstance(exc, JSOOMException) or (self._mr is not None and self._mr.was_hard_memory_limit_reached())
        self.close()
        why = f"used more than {MEMORY_LIMIT // 1024 // 1024} MB of memory" if memory else _first_line(str(exc))
        return self._stopped(payloads, clock, f"stopped: {why}")

    def _runs_of(self, answer: object, payloads: list[str], clock: float) -> list[Run]:
        """The runs of the runner's answer (JSON text of a ``Run`` per call, as an array: decoded into the
        Structs at once, ~1 µs a call less than a dict per call read by key)."""
        elapsed_ms = (time.perf_counter() - clock) * 1000
        try:
            try:
                runs = _decode_runs(answer)  # type: ignore[arg-type]  # mini-racer answers a JS string as a str
            except msgspec.DecodeError:  # a request not an object (a toJSON's array), or a lone surrogate escaped
                runs = _loose(answer)  # type: ignore[arg-type]  # idem
        except RecursionError:  # the runner refuses what nests past MAX_DEPTH: never met, never a crash
            deep = f"a field of the returned request nests deeper than {MAX_DEPTH} levels"
            return self._stopped(payloads, clock, deep)
        if len(payloads) == 1:
            runs[0].duration_ms = elapsed_ms
        else:
            share_batch_time(runs, elapsed_ms)
        return runs

    @staticmethod
    def _stopped(payloads: list[str], clock: float, error: str) -> list[Run]:
        duration_ms = (time.perf_counter() - clock) * 1000
        return [Run(error=error, duration_ms=duration_ms, stopped=True) for _ in payloads]

    def _fence_due(self) -> None:
        self._fence_timer = None
        if self.closed:
            return
        quiet_s = time.monotonic() - self._last_call
        if quiet_s < TIME_LIMIT_S:  # a call came since, and was the fence: look again a limit after it
            self._fence_timer = asyncio.get_running_loop().call_later(TIME_LIMIT_S - quiet_s, self._fence_due)
        else:
            self._fence = asyncio.create_task(self._fenced(), name="transform:fence")

    async def _fenced(self) -> None:
        """Waits, within the time limit, for the isolate to be idle again (promise jobs the last call left);
        closes it otherwise."""
        async with self._lock:
            mr = self._mr
            if mr is None:
                return
            try:
                async with asyncio.timeout(TIME_LIMIT_S):
                    await mr.eval_cancelable("0")
            except (TimeoutError, JSEvalException):
                self.close()
            if self._retired and not self._queue:
                self.close()


async def check(source: str) -> Problem | None:
    """Why ``source`` is not a transform, or None: it must compile, and loading it (its top-level code, in
    the sandbox and within the limits) must define ``handler``. The isolate is made for the check alone."""
    sandbox = Sandbox.compile(source)
    if isinstance(sandbox, Problem):
        return sandbox
    try:
        run = await sandbox.run('{"check": true}')
    finally:
        sandbox.close()
    return None if run.error is None else Problem(run.error, run.line)
