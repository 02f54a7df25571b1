"""One sandbox process (``control.transform.child``) as the pool sees it: its pipes, the batches sent to it
and not yet answered, and the clock that kills it.

Batches are pipelined: up to ``PIPELINE`` are written before the first is answered, so the process never
waits a round trip through the caller's event loop for its next batch (on a loaded machine that round trip,
not V8, was most of a trivial transform's cost). The process runs them one at a time, in order, and answers
in order, so the oldest unanswered batch is the one running: it alone is timed (``TIME_LIMIT_S`` +
``GRACE_S`` from when the batch before it was answered), and it alone is to blame when the process dies.
The batches behind it never started; they fail with ``SandboxEndedError.innocent`` set, and the pool sends
them again.

The clock is the caller's event loop, which may be late (a stalled caller, a loaded machine), and the process
may wait for a core; neither is the call's doing. So when the clock runs out (``_overdue``) the process is
killed only if no byte of its answer has come (``_arriving``) and it spent ``TIME_LIMIT_S`` + ``GRACE_S`` of
CPU since the batch began (``_cpu_s``: its own clock's reading in the answer before, against
``/proc/<pid>/stat`` now); else the clock goes on for what is left, and ``HARD_S`` of wall time kills it
whatever it spent (a process stopped, or blocked outside V8). ADR 0050, amended 2026-12-03. A batch V8
stopped is run again call by call in the same process, and the process says when each begins (an empty
frame): the clock starts over for it (``_restart``, ADR 0050, amended 2026-12-04).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Callable

import msgspec

from control.transform.wire import CALL_MEMORY, TIME_LIMIT_S, WALL_LIMIT_S, Answer, Call
from shared.errors import SandboxEndedError

__all__ = ("GRACE_S", "HARD_S", "PIPELINE", "Process", "Settle")

GRACE_S = 0.25
"""How long after ``TIME_LIMIT_S`` (of CPU: the process's own stop did not come) a process that has not
answered is killed."""
HARD_S = WALL_LIMIT_S + 1.0
"""How long a batch may go unanswered by the wall clock, however little CPU its process spent: the process
stops a call itself at ``WALL_LIMIT_S``; one that has not answered a second later is stuck, and killed."""
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
START_S = 30.0
"""How long a new process may take to be up (Python and V8 loaded) before its first batch's clock starts."""
PIPELINE = 2
"""Batches written to a process before the first is answered."""
Settle = Callable[[Answer | SandboxEndedError], None]
"""What is called once a batch is answered, or has failed (``SandboxEndedError``): synchronously, in the turn
of the event loop that read the answer (``Process.submit``)."""
_TAIL = 4096
_HEADER = struct.Struct(">I")
_encode_into = msgspec.msgpack.Encoder().encode_into
_decode = msgspec.msgpack.Decoder(Answer).decode


def _reason(returncode: int | None, lines: list[str]) -> str:
    """Why a process died, from its exit status and the last of what it printed (V8's fatal messages)."""
    said = [line for line in lines if ("Fatal" in line or "FATAL" in line or "out of memory" in line.lower())]
    said = [line for line in said if not line.endswith(":")] or said  # "Fatal error with no security impact:"
    first = said[0] if said else ""
    if returncode is not None and returncode < 0:
        try:
            status = signal.Signals(-returncode).name
        except ValueError:
            status = f"signal {-returncode}"
    else:
        status = f"exit status {returncode}"
    return f"{first[:200]}; {status}" if first else status


_ALLOCATION_FAILED = re.compile(r"Fatal (?:JavaScript|process) out of memory: (?!invalid )")
"""V8's words when an allocation failed (``CALL_AND_RETRY_LAST``, ``Reached heap limit``, ``Zone``...): under the
batch's ``RLIMIT_DATA`` that is the transform's memory. Not ``out of memory: invalid array length``, which is
V8's check of a length past its largest array, made before any allocation (``tests/transform/fatal.py``)."""


def _ended_message(returncode: int | None, tail: bytes) -> str:
    """The error of the call whose process died: a memory overrun in plain words when V8 said an allocation
    failed, else that it ended its process; with why (``_reason``) in both. Measured (mini-racer 0.14): a
    256 MB string made flat at once prints ``Fatal JavaScript out of memory: CALL_AND_RETRY_LAST`` and dies
    by SIGTRAP; but ``JSON.stringify`` of a 128 MB string (which runs whole under a 600 MB limit) dies by
    SIGTRAP under the 160 MB one having printed nothing, as another V8 crash may: such a death is not called
    memory (no guess) and keeps the general words."""
    lines = [line.strip("# \t") for line in tail.decode("utf-8", "replace").splitlines()]
    why = _reason(returncode, lines)
    if any(_ALLOCATION_FAILED.match(line) for line in lines):
        return (
            f"stopped: the transform used more memory than its limit ({CALL_MEMORY // 2**20} MB per batch) "
            f"and ended its sandbox process ({why})"
        )
    return f"stopped: the transform ended its sandbox process ({why})"


def _child_env() -> dict[str, str]:
    """The environment of a sandbox process: what Python needs to find its packages, nothing else."""
    import os

    return {name: os.environ[name] for name in ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LANG") if name in os.environ}


class Process:
    """A sandbox process, started at once in the background: batches can be handed to it (``call``) before
    it is up. ``depth``: batches handed to it and not yet answered (or failed); the pool counts one up as it
    hands a batch over, the process counts it down as it settles it."""

    def __init__(self, memory_mb: int) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.depth = 0
        self.tail = bytearray()
        self._sent: deque[Settle] = deque()
        self._timer: asyncio.Handle | None = None
        self._ended: SandboxEndedError | None = None
        self._dying = False
        self._up = False
        self._ready = asyncio.create_task(self._start(memory_mb), name="sandbox:start")
        self._reader: asyncio.Task[None] | None = None
        self._pidfd: int | None = None
        self._stdout_fd: int | None = None
        self._answering = False
        """The reader has the running batch's answer's header and waits for the rest: the batch is done."""
        self._cpu0 = 0.0
        """The process's CPU time (s) when the running batch began: what it said with its last answer."""
        self.began: float | None = None
        """When the running batch began (``time.perf_counter()``): the process was up and the batch before
        it answered. None before the process is up. What a stopped call ran for is measured from here, not
        from when it was sent: a new process's start, or a batch ahead of it, is not the call's time."""

    async def _start(self, memory_mb: int) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "control.transform.child",
            str(memory_mb),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=2**26,
            start_new_session=True,  # a signal to the caller's process group is not the sandbox's
            env=_child_env(),  # none of the caller's secrets (database URL, encryption keys) is there
        )
        with contextlib.suppress(AttributeError, OSError):  # no pidfds here (Linux < 5.3): ``os.kill`` then
            self._pidfd = os.pidfd_open(self.proc.pid)
        with contextlib.suppress(AttributeError, OSError):  # the answers' pipe, for ``_arriving``; else None
            transport = self.proc._transport  # type: ignore[attr-defined]  # asyncio keeps it private
            self._stdout_fd = transport.get_pipe_transport(1).get_extra_info("pipe").fileno()
        self._stderr = asyncio.create_task(self._drain_stderr(), name="sandbox:stderr")
        self._reader = asyncio.create_task(self._read(), name="sandbox:answers")

    @property
    def alive(self) -> bool:
        return self._ended is None and (self.proc is None or self.proc.returncode is None)

    @property
    def started(self) -> bool:
        """Its pipes are there (it may not be up yet): ``submit`` writes at once."""
        return self._ready.done() and not self._ready.cancelled() and self._ready.exception() is None

    def submit(self, call: Call, settle: Settle) -> None:
        """Writes a batch now (``started`` must be true); ``settle`` gets its answer, or the
        ``SandboxEndedError`` it failed with, in the turn of the event loop that read it: the pool hands the
        process its next batch and the calls their results there, not a turn or two later through a task
        awaiting a future (ADR 0060, amendment of 2026-12-03)."""
        if not self.alive or self._dying:
            ended = SandboxEndedError(
                "stopped: its sandbox process ended before it began", crashed=False, innocent=True
            )
            asyncio.get_running_loop().call_soon(self._settle, settle, ended)  # never within the caller's turn
            return
        assert self.proc is not None
        assert self.proc.stdin is not None
        frame = bytearray(_HEADER.size)  # the length goes in front once the call is encoded after it: no copy
        _encode_into(call, frame, _HEADER.size)
        _HEADER.pack_into(frame, 0, len(frame) - _HEADER.size)
        self.proc.stdin.write(frame)
        self._sent.append(settle)
        if len(self._sent) == 1:
            self._arm(0.0 if self._up else START_S)

    async def call(self, call: Call) -> Answer:
        """Sends a batch and awaits its answer; ``SandboxEndedError`` when the process ends first. Batches are written
        in the order their calls began (they all await the same start, then write without awaiting)."""
        try:
            await self._ready
        except BaseException:
            self.depth -= 1
            raise
        done: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()

        def settle(result: Answer | SandboxEndedError) -> None:
            if done.done():  # its caller was cancelled
                return
            if isinstance(result, SandboxEndedError):
                done.set_exception(result)
            else:
                done.set_result(result)

        self.submit(call, settle)
        return await done

    def _settle(self, settle: Settle, result: Answer | SandboxEndedError) -> None:
        """A batch is done with (answered or failed): one fewer in the process, and its ``settle`` called."""
        self.depth -= 1
        try:
            settle(result)
        except Exception as exc:  # noqa: BLE001 - a bug of the caller's, not this process's end
            asyncio.get_running_loop().call_exception_handler(
                {"message": "settling a sandbox batch raised", "exception": exc}
            )

    def _arm(self, more_s: float = 0.0) -> None:
        """The running batch's clock: ``more_s`` on top while the process is not up yet."""
        self.began = None if more_s else time.perf_counter()
        self._timer = asyncio.get_running_loop().call_later(TIME_LIMIT_S + GRACE_S + more_s, self._overdue)

    def _overdue(self) -> None:
        """The running batch's clock ran out; judged on the loop's next turn (``_judge``): an answer already
        read into the pipe's buffer in this turn is decoded by the reader's task first, which then cancels
        the judgement (its wakeup was queued before this timer ran)."""
        self._timer = asyncio.get_running_loop().call_soon(self._judge)

    def _judge(self) -> None:
        """Kills the process if the running batch is really past its limit: no byte of its answer here, and
        ``TIME_LIMIT_S`` + ``GRACE_S`` of the process's CPU spent since it began, or ``HARD_S`` of wall time.
        Otherwise the clock goes on for the CPU still to spend (at least ``_TICK_S``), within ``HARD_S``."""
        self._timer = None
        if not self._up or self.began is None:  # not up within ``START_S``
            self._end(SandboxEndedError(f"stopped: still running after {TIME_LIMIT_S:g} s", crashed=False))
            return
        limit = TIME_LIMIT_S + GRACE_S
        wall = time.perf_counter() - self.began
        if self._arriving():  # done: its answer comes (or the pipe's end, a death the reader reports)
            self._timer = asyncio.get_running_loop().call_later(GRACE_S, self._overdue)
            return
        spent = self._cpu_s() - self._cpu0
        if spent < limit and wall < HARD_S:
            more = min(max(limit - spent, _TICK_S), HARD_S - wall)
            self._timer = asyncio.get_running_loop().call_later(more, self._overdue)
            return
        self._end(SandboxEndedError(f"stopped: still running after {TIME_LIMIT_S:g} s", crashed=False))

    def _restart(self) -> None:
        """The running batch was stopped by V8 and its calls run again, each alone: the clock starts over for
        the next of them (from the process's CPU now, and now), as V8's own limit does. Timed from the batch's
        start, the first call run alone was killed a quarter second in, and the pool ran every call of the
        batch again in a new process: 4 runaway calls cost 6 s, 8 cost 10.6 (issue 42)."""
        if not self._sent or self._ended is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._cpu0 = self._cpu_s()  # unreadable (not Linux): inf, and the wall clock decides, as in ``_judge``
        self._arm()

    def _arriving(self) -> bool:
        """Whether the running batch's answer has begun to come: its header read, or bytes (or the end) in
        the pipe that the event loop has not read yet."""
        if self._answering:
            return True
        if self._stdout_fd is None:
            return False
        poll = select.poll()  # not ``select.select``: a busy control plane's descriptors pass 1024
        poll.register(self._stdout_fd, select.POLLIN)
        return bool(poll.poll(0))  # data, the pipe's end (POLLHUP), or a closed descriptor (POLLNVAL)

    def _cpu_s(self) -> float:
        """The process's CPU time now (all its threads, user and system, in clock ticks), from
        ``/proc/<pid>/stat``: read only when a clock runs out, never per batch (12 µs a read). Where it cannot
        be read (not Linux), infinite: killed at the limit of the wall clock, as before."""
        assert self.proc is not None
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as stat:
                text = stat.read()
            fields = text[text.rindex(b")") + 2 :].split()
            return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime
        except (OSError, ValueError, IndexError):
            return float("inf")

    async def _read(self) -> None:
        assert self.proc is not None
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            size = _HEADER.unpack(await stdout.readexactly(_HEADER.size))[0]  # up (Python and V8 loaded)
            self._cpu0 = _decode(await stdout.readexactly(size)).cpu_s
            self._up = True
            if self._timer is not None:
                self._timer.cancel()
                self._arm()
            while True:
                size = _HEADER.unpack(await stdout.readexactly(_HEADER.size))[0]
                if not size:  # a call of the running batch runs again alone (``child.RESTART``)
                    self._restart()
                    continue
                self._answering = True
                answer = _decode(await stdout.readexactly(size))
                self._answering = False
                self._cpu0 = answer.cpu_s  # the next batch began there
                settle = self._sent.popleft()
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                if self._sent:
                    self._arm()  # the next batch starts now
                self._settle(settle, answer)
        except (asyncio.IncompleteReadError, ConnectionError, msgspec.DecodeError, IndexError):
            if self._ended is not None:  # killed for time: that is why it is gone
                return
            self._dying = True  # nothing more is sent; what waited behind the running batch goes elsewhere
            running = self._sent.popleft() if self._sent else None
            self._end(
                SandboxEndedError("stopped: its sandbox process ended before it began", crashed=False, innocent=True)
            )
            await self._kill()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    await self._stderr
            if running is not None:
                self._settle(
                    running, SandboxEndedError(_ended_message(self.proc.returncode, bytes(self.tail)), crashed=True)
                )

    def _end(self, ended: SandboxEndedError) -> None:
        """The running batch fails with ``ended`` (unless ``ended.innocent``), those behind it as never
        started; the process is killed."""
        if self._ended is not None:
            return
        self._ended = ended
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._sigkill()
        sent, self._sent = self._sent, deque()
        for at, settle in enumerate(sent):
            self._settle(settle, ended if at == 0 else SandboxEndedError(ended.message, crashed=False, innocent=True))

    async def _drain_stderr(self) -> None:
        assert self.proc is not None
        stream = self.proc.stderr
        assert stream is not None
        while chunk := await stream.read(65536):
            self.tail += chunk
            del self.tail[:-_TAIL]

    def _sigkill(self) -> None:
        """SIGKILL, never by ``proc.kill()``: ``Popen.send_signal`` first polls (``os.waitpid``), which reaps
        a child that has just died (a crash, a kill before) ahead of asyncio's child watcher; the watcher then
        logs "Unknown child process pid" and reports 255 instead of the signal that ended the process, which
        is what a crashed call's error names. A pidfd signals this process only, dead or reaped; without
        one, ``os.kill`` while asyncio has not seen it exit (the pid is not reused before asyncio's watcher
        reaps it, and the return code is set on the loop's next turn after that)."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(proc.pid, signal.SIGKILL)

    async def _kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        self._sigkill()
        try:
            await proc.wait()
        finally:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        if proc.stdin is not None:
            proc.stdin.close()

    async def kill(self) -> None:
        """Ends the process (what it was sent fails as never started) and waits for it."""
        if not self._ready.done():
            self._ready.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._ready
        self._end(SandboxEndedError("stopped: the sandbox pool closed", crashed=False))
        await self._kill()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
