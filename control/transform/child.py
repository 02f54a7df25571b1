"""A sandbox process: the only place V8 runs. ``python -m control.transform.child MEMORY_MB``.

Started by ``control.transform.pool`` and spoken to over its stdin and stdout: frames of a 4-byte
big-endian length and a msgpack ``Call``, answered by one msgpack ``Answer`` each, one call at a time, in
order (the pool may have written the next before this one is answered); a frame first says it is up. Each
answer says the process's CPU time then (``Answer.cpu_s``): the pool's clock counts CPU, not waiting for it.
An empty frame (``RESTART``) says a stopped batch's calls run again, each alone, from now: the clock starts over.
Before anything else it sets its own ``RLIMIT_DATA`` (the OS limit on private writable memory, which V8's
heap, its zone memory and malloc all count against; ``RLIMIT_AS`` cannot be used: V8 reserves a 4 GiB cage
of address space at start) and ``RLIMIT_CORE`` to 0; before each batch it lowers the soft ``RLIMIT_DATA``
to what it holds plus ``CALL_MEMORY``, and raises it back after. What V8 cannot survive (a fatal ``invalid size``
error, memory past the OS limit) ends this process alone: the pool fails the call it was running and
starts another.

It keeps the last ``CACHED`` compiled transforms (an isolate each, ``control.transform.sandbox``), keyed by
account and source, so a destination's deliveries compile once per process and no two accounts ever share
an isolate (the same source of two accounts is two isolates); nothing of a call is kept by the next one
(``control.transform.prelude``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import os
import resource
import struct
import sys
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

import msgspec

from control.transform.apply import Prepared, mapped, payload_of
from control.transform.wire import CALL_MEMORY, Answer, Call, Run, checked, problem_text

if TYPE_CHECKING:
    from control.transform.sandbox import Sandbox

CACHED = 32
"""Compiled transforms kept per process (a few MB of V8 heap each)."""


_STATM: int | None = None
_PAGE = os.sysconf("SC_PAGE_SIZE")


def data_bytes() -> int:
    """This process's private writable memory now, as ``RLIMIT_DATA`` counts it (Linux): ``/proc/self/statm``'s
    data field (``VmData`` plus the stack, a little over), read with one ``pread`` of a file kept open, as it
    is after every batch (``/proc/self/status`` opened and parsed each time cost 20 µs)."""
    global _STATM
    if _STATM is None:
        _STATM = os.open("/proc/self/statm", os.O_RDONLY)
    return int(os.pread(_STATM, 256, 0).split()[5]) * _PAGE


HEADROOM_MB = 256
"""What of the OS limit is kept free for the next call (its 64 MB heap, and what V8 needs beside it)."""
_HEADER = struct.Struct(">I")
RESTART = _HEADER.pack(0)
"""An empty frame, written before each call of a stopped batch runs again alone (``Sandbox.alone``): the pool's
clock on the batch starts over, each call timed alone in this process as V8 times it (``control.transform.process``).
A frame of an answer is never empty."""


def limit_memory(megabytes: int) -> None:
    """The OS limit on this process's private writable memory, soft and hard (it cannot raise it again)."""
    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


async def _runs(sandbox: Sandbox, call: Call) -> list[Run]:
    """The batch's runs, in order: a request (``Input``) is mapped to the transform's payload and body here
    and what it returned to the request to send (``control.transform.apply``); one whose body nests too deep
    fails without a call."""
    runs: list[Run | None] = [None] * len(call.payloads)
    payloads: list[str] = []
    bodies: list[str] = []
    called: list[tuple[int, Prepared | None]] = []
    for at, item in enumerate(call.payloads):
        if isinstance(item, str):
            payloads.append(item)
            bodies.append("")
            called.append((at, None))
            continue
        made = payload_of(item)
        if isinstance(made, Run):
            runs[at] = made
        else:
            payloads.append(made[0])
            bodies.append(made[1])
            called.append((at, made[2]))
    if payloads:
        limit = resource.getrlimit(resource.RLIMIT_DATA)[1]
        resource.setrlimit(resource.RLIMIT_DATA, (min(limit, data_bytes() + CALL_MEMORY), limit))
        try:
            done = sandbox.run_now(payloads, bodies)  # nothing else to do meanwhile: waited for on this thread
            if done is None:  # a fence holds the isolate (``Sandbox._fenced``): after it
                done = await sandbox.run_many(payloads, bodies)
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        for (at, prepared), run in zip(called, done, strict=True):
            if run.request is not None and run.request.__class__ is not dict:
                run = _not_an_object(run)
            runs[at] = run if prepared is None else mapped(run, prepared)
    return [run for run in runs if run is not None]


_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _not_an_object(run: Run) -> Run:
    """A call whose returned request is JSON but not an object (its ``toJSON`` gave an array, a string...):
    failed here, saying so. Answered as it was, it could not be decoded by the pool (a ``Run``'s request is an
    object), which took that for this process's death: killed it, and the call was recorded as having crashed
    its process."""
    kind = _KINDS.get(run.request.__class__, "not an object")
    return Run(
        error=f"the returned request cannot be sent: as JSON it is {kind}, not an object (its toJSON?)",
        logs=run.logs,
        logs_truncated=run.logs_truncated,
        duration_ms=run.duration_ms,
    )


async def _serve(budget: int) -> None:
    """Serves calls until the pool closes the pipe. ``budget``: the memory (as the OS limit counts it)
    past which the cached isolates are all closed after a call: V8 itself takes about 540 MB of it, each
    isolate 10 MB more, and what its calls left in its heap until it collects (up to 64 MB each), so a
    full cache of them would pass the OS limit and end the process."""
    from control.transform.sandbox import Problem, Sandbox  # V8 is loaded after the limits are set

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = os.fdopen(sys.stdout.fileno(), "wb", buffering=0, closefd=False)
    decode = msgspec.msgpack.Decoder(Call).decode
    encoder = msgspec.msgpack.Encoder()
    up = encoder.encode(Answer(cpu_s=time.process_time()))
    out.write(_HEADER.pack(len(up)) + up)  # up: the pool's clock for the first batch starts now, not at the exec
    compiled: OrderedDict[tuple[str, str], Sandbox | Problem] = OrderedDict()

    def restart() -> None:
        out.write(RESTART)

    gc.freeze()  # what start-up made lives as long as the process: full collections stop scanning it (ADR 0010)
    while True:
        try:
            size = _HEADER.unpack(await reader.readexactly(_HEADER.size))[0]
            call = decode(await reader.readexactly(size))
        except asyncio.IncompleteReadError:  # the pool closed the pipe (or its process is gone)
            return
        key = (call.account, call.source)  # the same code of two accounts: two isolates
        sandbox = compiled.get(key)
        if sandbox is None:
            sandbox = Sandbox.compile(call.source)
            if isinstance(sandbox, Sandbox):
                sandbox.alone = restart
            compiled[key] = sandbox
            while len(compiled) > CACHED:
                old = compiled.popitem(last=False)[1]
                if isinstance(old, Sandbox):
                    old.retire()
        compiled.move_to_end(key)
        if isinstance(sandbox, Problem):
            answer = Answer(problem=problem_text(sandbox.message), line=sandbox.line, cpu_s=time.process_time())
        else:
            runs = await _runs(sandbox, call)
            answer = Answer(runs=runs, cpu_s=time.process_time())
        try:
            data = encoder.encode(answer)
        except UnicodeEncodeError:  # a lone surrogate somewhere: each run checked, the guilty ones failed
            data = encoder.encode(Answer(runs=[checked(run) for run in answer.runs or ()], cpu_s=answer.cpu_s))
        out.write(_HEADER.pack(len(data)) + data)
        if data_bytes() > budget:
            for cached in compiled.values():
                if isinstance(cached, Sandbox):
                    cached.retire()
            compiled.clear()


PIPE_BYTES = 256 * 1024
"""The stdin pipe's buffer: the pool writes a process's next batch while it runs one (``PIPELINE``), and this
process does not read while V8 runs (``Sandbox.run_now``); at the default 64 KB, a batch of a claim's deliveries
(~43 KB for 54 calls of 400-byte bodies) did not fit beside the one before, and its writer waited for this
process to read the first part."""


def widen_stdin() -> None:
    """Sets the stdin pipe's buffer to ``PIPE_BYTES`` where the OS allows (Linux; kept as it is elsewhere)."""
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(sys.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def main() -> None:
    megabytes = int(sys.argv[1])
    limit_memory(megabytes)
    widen_stdin()
    asyncio.run(_serve((megabytes - HEADROOM_MB) * 1024 * 1024))


if __name__ == "__main__":
    main()
