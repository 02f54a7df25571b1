"""The sandbox against hostile code: each attack stopped or refused, the worker's loop unharmed, and nothing
left for the next call. Real V8 isolates (mini-racer), no database."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest

from control.transform.sandbox import MAX_LOGS, MAX_OUTPUT, TIME_LIMIT_S, Problem, Run, Sandbox, check
from tests.helpers import wait_for

REQUEST = {
    "method": "POST",
    "path": "/hooks",
    "query": "",
    "headers": {"content-type": "application/json"},
    "body": {"a": 1},
}
PAYLOAD = json.dumps({"request": REQUEST, "context": {"event": {"id": "evt_1"}, "destination": None}})
ECHO = "function handler(request) { return request; }"


@pytest.fixture
async def make() -> AsyncIterator[Callable[[str], Sandbox]]:
    made: list[Sandbox] = []

    def build(source: str) -> Sandbox:
        made.append(Sandbox(source))
        return made[-1]

    yield build
    for sandbox in made:
        sandbox.close()


async def once(make: Callable[[str], Sandbox], source: str) -> Run:
    return await make(source).run(PAYLOAD)


async def test_a_transform_returns_the_request_and_its_logs(make) -> None:
    run = await once(make, "function handler(r, c) { console.log('event', c.event.id); r.body.b = 2; return r; }")
    assert run.error is None
    assert run.request["body"] == {"a": 1, "b": 2}
    assert run.logs == ["event evt_1"]
    assert 0 < run.duration_ms < 1000


async def test_an_infinite_loop_is_stopped_and_the_event_loop_keeps_running(make) -> None:
    spinning = make("function handler() { for (;;) {} }")
    healthy = make(ECHO)
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    stuck = asyncio.create_task(spinning.run(PAYLOAD))
    others = [await healthy.run(PAYLOAD) for _ in range(20)]  # meanwhile: another transform's calls
    run = await stuck
    ticker.cancel()
    assert run.stopped
    assert run.error == f"stopped: still running after {TIME_LIMIT_S:g} s"
    assert TIME_LIMIT_S <= time.monotonic() - started < TIME_LIMIT_S + 1.0
    assert all(o.error is None for o in others)
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert max(gaps) < 0.25, max(gaps)  # the loop was never blocked while JavaScript ran
    assert spinning.closed  # its isolate is gone: the next call compiles the source again
    again = await spinning.run(PAYLOAD)
    assert again.stopped


@pytest.mark.parametrize(
    "bomb",
    [
        "const a = []; for (;;) a.push({ n: Math.random(), s: 'x'.repeat(100) + Math.random() });",
        "const m = new Map(); let i = 0; for (;;) m.set(i++, [i, i, i]);",
        "let s = 'x'; for (;;) s += s;",  # a string past V8's length limit: a RangeError, caught
        "const a = []; for (let i = 0; i < 1e9; i++) a.push(new Array(1e5).fill(i));",
    ],
)
async def test_a_memory_bomb_is_stopped(make, bomb: str) -> None:
    run = await once(make, f"function handler() {{ {bomb} }}")
    assert run.error is not None
    assert run.stopped or run.error.startswith("RangeError"), run.error
    if run.stopped:
        assert "memory" in run.error or "still running" in run.error


async def test_memory_outside_the_heap_cannot_be_allocated(make) -> None:
    """Typed arrays and ArrayBuffer live outside V8's heap limit: they are not there at all."""
    for expr in ("new Uint8Array(2 ** 30)", "new ArrayBuffer(2 ** 30)", "new DataView(null)", "new Float64Array(9)"):
        run = await once(make, f"function handler() {{ return {{ body: String({expr}) }}; }}")
        assert (run.error or "").startswith("ReferenceError"), (expr, run.error)


@pytest.mark.parametrize(
    ("attempt", "refused"),
    [
        ("fetch('https://example.com')", "ReferenceError"),
        ("require('fs')", "ReferenceError"),
        ("new XMLHttpRequest()", "ReferenceError"),
        ("process.exit(1)", "ReferenceError"),
        ("WebAssembly.compile(new Uint8Array([0, 97, 115, 109]))", "ReferenceError"),
        ("setTimeout(() => {}, 10)", "TypeError"),
        ("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5000)", "ReferenceError"),
        ("queueMicrotask(() => {})", "ReferenceError"),
        ("__timer_manager.setTimeout(() => {}, 1)", "TypeError"),
    ],
)
async def test_io_and_timers_are_not_there(make, attempt: str, refused: str) -> None:
    run = await once(make, f"function handler(r) {{\n  {attempt};\n  return r;\n}}")
    assert (run.error or "").startswith(refused), run.error
    assert run.line == 2


async def test_a_dynamic_import_never_loads_anything(make) -> None:
    run = await once(make, "function handler(r) { return import('fs'); }")
    assert run.error is not None
    assert "Promise" in run.error
    run = await once(make, "async function handler(r) { return r; }")
    assert run.error is not None
    assert "Promise" in run.error
    refused = Sandbox.compile("import fs from 'fs';\nfunction handler(r) { return r; }")
    assert isinstance(refused, Problem)  # static imports are not part of a function body


async def test_date_works_but_cannot_be_abused(make) -> None:
    run = await once(
        make, "function handler(r) { r.body.at = new Date(0).toISOString(); r.body.now = Date.now(); return r; }"
    )
    assert run.request["body"]["at"] == "1970-01-01T00:00:00.000Z"
    assert abs(run.request["body"]["now"] / 1000 - time.time()) < 60
    busy = await once(
        make, "function handler(r) { const end = Date.now() + 60000; while (Date.now() < end) {} return r; }"
    )
    assert busy.stopped
    for change in ("Date.now = () => 0", "Date.prototype.toISOString = () => 'x'", "globalThis.Date = function () {}"):
        run = await once(make, f"function handler(r) {{ {change}; return r; }}")
        assert (run.error or "").startswith("TypeError"), (change, run.error)


@pytest.mark.parametrize(
    "pollution",
    [
        "Object.prototype.polluted = 'yes'",
        "Array.prototype.push = function () { return 'hijacked'; }",
        "JSON.stringify = () => '{}'",
        "globalThis.leak = 1",
        "Object.defineProperty(Object.prototype, 'polluted', { get() { return 'yes'; } })",
        "Object.getPrototypeOf(function* () {}).polluted = 'yes'",
        "Object.getPrototypeOf([][Symbol.iterator]()).next = () => ({ done: true })",
        "Error.prepareStackTrace = () => 'x'",
        "__TimerManager.prototype.polluted = 'yes'",
    ],
)
async def test_nothing_survives_from_one_call_to_the_next(make, pollution: str) -> None:
    source = f"""let calls = 0;
function handler(r) {{
  calls += 1;
  if (r.body.first) {{ try {{ {pollution}; }} catch (e) {{ console.log('refused', e.name); }} }}
  const seen = [({{}}).polluted, [].push(1), JSON.stringify({{a: 1}}), typeof leak, calls,
                [...[1, 2]].length, Object.getPrototypeOf(function* () {{}}).polluted];
  return {{ body: seen }};
}}"""
    sandbox = make(source)
    first = await sandbox.run(json.dumps({"request": {**REQUEST, "body": {"first": True}}, "context": {}}))
    second = await sandbox.run(PAYLOAD)
    assert first.error is None, first.error
    assert first.logs == ["refused TypeError"]
    assert second.request["body"] == [None, 1, '{"a":1}', "undefined", 1, 2, None]


async def test_work_left_in_promises_is_stopped(make) -> None:
    """A promise job runs after the call returned, outside its timer: the fence stops it."""
    sandbox = make("function handler(r) { (async () => { await 0; for (;;) {} })(); return r; }")
    run = await sandbox.run(PAYLOAD)
    assert run.error is None  # the call itself returned
    await wait_for(lambda: asyncio.sleep(0, sandbox.closed), timeout=2 * TIME_LIMIT_S + 2)
    assert (await sandbox.run(PAYLOAD)).error is None  # a fresh isolate, the same source


async def test_huge_output_and_logs_are_bounded(make) -> None:
    run = await once(make, f"function handler(r) {{ return {{ body: 'x'.repeat({MAX_OUTPUT + 10}) }}; }}")
    assert run.error == f"the returned request is larger than {MAX_OUTPUT} characters"
    run = await once(
        make, "function handler(r) { for (let i = 0; i < 100000; i++) console.log('line', i); return null; }"
    )
    assert run.error is None
    assert run.request is None
    assert run.logs_truncated
    assert sum(len(line) + 1 for line in run.logs) <= MAX_LOGS + 1
    run = await once(make, "function handler(r) { const o = {}; o.o = o; return { body: o }; }")
    assert run.error is not None
    assert run.error.startswith("the returned request cannot be sent as JSON: TypeError")


async def test_errors_name_the_line_of_the_source(make) -> None:
    run = await once(make, "// a comment\nfunction handler(r) {\n  return r.body.missing.deeper;\n}")
    assert run.error == "TypeError: Cannot read properties of undefined (reading 'deeper')"
    assert run.line == 3
    run = await once(make, "function handler(r) {\n  throw 'plain';\n}")
    assert (run.error, run.line) == ("uncaught plain", None)
    syntax = Sandbox.compile("function handler(r) {\n  return r +;\n}")
    assert syntax == Problem("SyntaxError: Unexpected token ';'", 2)


def test_a_block_left_open_is_named_as_such() -> None:
    """A missing `}` made V8 stumble on the `)` of the wrapper the source is compiled in: `Unexpected token ')'`
    of a source that has none. It reads as the end of input with a block open, on the source's last line; a
    `)` the source itself has misplaced is still named as V8 names it."""
    unclosed = Sandbox.compile("function handler(r) {\n  if (r.body) {\n    return r;\n}\n")
    assert unclosed == Problem("SyntaxError: Unexpected end of input (a { is not closed)", 5)
    stray = Sandbox.compile("function handler(r) {\n  return r);\n}")
    assert stray == Problem("SyntaxError: Unexpected token ')'", 2)


async def test_a_source_cannot_close_its_function_early() -> None:
    """The source is compiled as a function body on its own: code after a stray `})` never runs at the
    isolate's top level (where it could keep state between calls)."""
    problem = await check("}); let kept = 0; (function () {\nfunction handler(r) { return r; }")
    assert problem is not None
    assert problem.line is None


async def test_check_wants_a_handler_and_a_source_that_loads() -> None:
    assert await check(ECHO) is None
    assert (await check("const handler = (r) => r;")) is None
    missing = await check("function transform(r) { return r; }")
    assert missing is not None
    assert missing.message == "the transform defines no function handler(request, context)"
    loops = await check("for (;;) {}\nfunction handler(r) { return r; }")
    assert loops is not None
    assert "still running" in loops.message
    throws = await check("null.x;\nfunction handler(r) { return r; }")
    assert throws is not None
    assert throws.message.startswith("while loading: TypeError")
    assert throws.line == 1


async def test_calls_of_one_transform_are_serialised_and_each_is_timed_alone(make) -> None:
    """A slow call does not count against the calls queued behind it."""
    sandbox = make("function handler(r) { const end = Date.now() + r.body.ms; while (Date.now() < end) {} return r; }")
    # 3 x 0.5 s: together past the 1 s limit, each well inside it (a loaded machine's scheduling included).
    slow = json.dumps({"request": {**REQUEST, "body": {"ms": 500}}, "context": {}})
    runs = await asyncio.gather(*(sandbox.run(slow) for _ in range(3)))
    assert [r.error for r in runs] == [None, None, None]


async def test_in_a_batch_only_the_call_that_ran_away_is_stopped(make) -> None:
    """Calls that wait while one runs go together as the next batch; a batch that was stopped runs again
    call by call, so the others get their own results."""
    sandbox = make("function handler(r) { if (r.body.loop) for (;;) {} return r; }")

    def payload(loop: bool) -> str:
        return json.dumps({"request": {**REQUEST, "body": {"loop": loop}}, "context": {}})

    first = asyncio.create_task(sandbox.run(payload(False)))  # in flight: the next ones queue behind it
    runs = await asyncio.gather(first, *(sandbox.run(payload(i == 2)) for i in range(5)))
    assert [run.stopped for run in runs] == [False, False, False, True, False, False]
    assert [run.request["body"]["loop"] for run in runs if not run.stopped] == [False] * 5


async def test_a_batch_waited_for_on_the_callers_thread_keeps_the_limits(make) -> None:
    """``run_now`` (a sandbox process's way: the batch waited for without the event loop) stops a runaway at
    the time limit and closes its isolate; only that call is stopped, the next batch compiles the source
    again in a new one. While another batch holds the isolate it declines (None), and the caller awaits
    ``run_many``."""
    sandbox = make("function handler(r) { if (r.body.loop) for (;;) {} return r; }")

    def payload(loop: bool) -> str:
        return json.dumps({"request": {**REQUEST, "body": {"loop": loop}}, "context": {}})

    isolate, clock = sandbox._mr, time.monotonic()
    runs = sandbox.run_now([payload(False), payload(True), payload(False)], ["", "", ""])
    assert runs is not None
    assert [run.stopped for run in runs] == [False, True, False]
    assert runs[1].error == f"stopped: still running after {TIME_LIMIT_S:g} s"
    assert [run.request["body"] for run in runs if not run.stopped] == [{"loop": False}] * 2
    assert time.monotonic() - clock < 4 * TIME_LIMIT_S
    assert sandbox._mr is not None
    assert sandbox._mr is not isolate
    async with sandbox._lock:  # a fence, or a batch sent the other way, holds the isolate
        assert sandbox.run_now([payload(False)], [""]) is None
    again = sandbox.run_now([payload(False)], [""])
    assert again is not None
    assert again[0].error is None


async def test_a_batch_answers_each_call_in_order_whatever_it_returned(make) -> None:
    """The runner answers each call as a ``Run``'s array, decoded into the Structs at once; a returned request
    that is not an object (a ``toJSON`` giving an array) and a log line with a lone surrogate each still get
    their own run, in order, the others untouched."""
    sandbox = make(
        "function handler(r, c) {"
        " if (c.n === 1) return { toJSON() { return [1, 2]; } };"
        " if (c.n === 2) console.log('\\ud800');"
        " return r; }"
    )
    payloads = [json.dumps({"request": REQUEST, "context": {"n": n}}) for n in range(4)]
    runs = await sandbox.run_many(payloads)
    assert [run.error is None for run in runs] == [True, True, False, True]
    assert runs[1].request == [1, 2]
    assert "lone UTF-16 surrogate" in (runs[2].error or "")
    assert runs[0].request == runs[3].request == REQUEST
    assert [run.line for run in runs] == [None] * 4
