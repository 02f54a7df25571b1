"""What goes between the pool and a sandbox process (``control.transform.child``): a ``Call`` (a transform's
source and the inputs of its calls) and an ``Answer`` (a ``Run`` per input, or why the source is not a
transform), msgpack in length-prefixed frames.

A delivery's input is the request it would send as it is (``Input``: the captured body's bytes, not
decoded) and its answer the request to send (``Sent``: what is unchanged left out, the caller has it). The
mapping between a request and what the transform sees (``control.transform.apply``) runs in the sandbox
process, on its own core, not in the caller's event loop: decoding the body, the JSON payload, and the checks
of what came back were most of a delivery worker's own CPU per transformed delivery (ADR 0060).

Only text crosses: a lone UTF-16 surrogate that JavaScript strings may hold cannot be encoded, so the
sandbox process checks every string it answers with (``text_problem``) and turns a run that left one into
a failed run saying where it was.

The structs here are not tracked by the cycle collector (``gc=False``): they hold only decoded or built
values (strings, bytes, dicts and lists of them), never a reference back, so they cannot be part of a cycle.
Tracked, the Inputs and Runs of a transformed round made its worker collect generation 0 three times as often
as a plain round's (ADR 0060, amended 2026-12-03 night).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = (
    "CALL_MEMORY",
    "MAX_LOGS",
    "MAX_OUTPUT",
    "MAX_SOURCE",
    "MEMORY_LIMIT",
    "TIME_LIMIT_S",
    "WALL_LIMIT_S",
    "Answer",
    "Call",
    "Input",
    "Problem",
    "Run",
    "Sent",
    "checked",
    "problem_text",
    "share_batch_time",
    "text_problem",
)

_encode = msgspec.msgpack.Encoder().encode

MAX_SOURCE = 65_536
"""Characters of JavaScript a transform may have."""
TIME_LIMIT_S = 1.0
"""Seconds a call may run in V8, by the wall clock of its sandbox process, less any time that process was
stalled (stopped, or so starved that its own clock woke late: ``control.transform.sandbox``)."""
WALL_LIMIT_S = 3.0
"""Wall seconds after which a call is stopped however much of that its process was stalled."""
MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes of V8 heap an isolate may use."""
CALL_MEMORY = 160 * 1024 * 1024
"""What a batch may add to its sandbox process's memory while it runs (the soft ``RLIMIT_DATA``, lowered to what
the process holds plus this before each batch, raised back after: ``control.transform.child``): V8's 64 MB
check runs only after a garbage collection, and one large allocation that none follows (a 256 MB string made
flat at once) ran whole and answered. Past it V8's allocation fails and the process ends: that call fails
alone (ADR 0085), and its error says it was memory when V8 said so (``control.transform.process``). 25 calls
in a row of 64 MB of garbage or of 55 MB live grew the process by 117 MB at most."""
MAX_OUTPUT = 4 * 1024 * 1024
"""Characters of the returned request as JSON (the edge takes bodies of 1 MiB by default)."""
MAX_LOGS = 4096
"""Characters of ``console`` output kept per call; what is past them is dropped (``logs_truncated``)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a source is not a transform: ``message`` (V8's, or what loading it did) and the ``line`` it names.
    A value, not an error: the services say which field it came in (``transform: line 3: ...``)."""

    message: str
    line: int | None


class Input(msgspec.Struct, kw_only=True, frozen=True, array_like=True, gc=False):
    """A request a delivery would send, and the call's ``context``: the sandbox process maps it to what the
    transform sees (``control.transform.apply``)."""

    method: str
    url: str
    headers: dict[str, Any]
    """Values are str, or bytes for a captured value that is not UTF-8 (held as a surrogate escape, which
    msgpack cannot carry; msgspec takes no union of str and bytes)."""
    body: bytes
    context: Any


class Sent(msgspec.Struct, kw_only=True, array_like=True, gc=False):
    """The request to send, as a sandbox process answers it for an ``Input``: None where it is what the
    input had (the URL, the body, a header's value), which the caller keeps, byte for byte."""

    method: str
    url: str | None
    headers: dict[str, str | None]
    """Each header to send, in order, with None for a value left as captured; when ``kept``, only those
    changed or added."""
    body: bytes | None
    kept: bool = False
    """Every captured header is sent, in its place and order, then those added: ``headers`` holds only what
    changed or was added (the caller copies its captured headers and updates them). The usual answer (a header
    added or set) then crosses, and is made into the request to send, without a None per unchanged header."""


class Run(msgspec.Struct, kw_only=True, array_like=True, gc=False):
    """What one call did: the returned request (None: skip, or an error), or the error and its line. The
    request is what the code returned for a JSON payload, and a ``Sent`` for an ``Input``. It crosses as an
    array (``array_like``): a batch's answer carries no field names per call, which both sides encode or match."""

    request: Sent | dict[str, Any] | None = None
    error: str | None = None
    line: int | None = None
    logs: list[str] = msgspec.field(default_factory=list)
    logs_truncated: bool = False
    duration_ms: float = 0.0
    stopped: bool = False
    """A limit stopped it (time, memory), or its process died."""
    crashed: bool = False
    """It ended its sandbox process (a V8 fatal error, memory past the OS limit, a signal)."""
    unrun: bool = False
    """The call never ran: its turn did not come within ``MAX_WAIT_S``, or the pool closed, so nothing about
    its code is known. Set by the pool only (never crosses the pipe); last, so an array without it decodes."""


class Call(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    account: str
    """Whose calls: a sandbox process never runs two accounts' calls in one isolate."""
    source: str
    payloads: list[str | Input]
    """JSON ``{"request", "context"}`` (or ``{"check": true}``: load the source, call nothing), or an
    ``Input``, per call."""


class Answer(msgspec.Struct, kw_only=True, frozen=True, gc=False):
    runs: list[Run] | None = None
    problem: str | None = None
    """Why the source is not a transform (it does not compile), with the ``line`` it names."""
    line: int | None = None
    cpu_s: float = 0.0
    """The sandbox process's CPU time when it answered (``time.process_time``): the next batch's starts
    there, and the pool's clock (``control.transform.process``) counts only what it spent since. Also the
    first frame's, which says the process is up."""


def _not_text(value: Any) -> bool:
    try:
        _encode(value)
    except UnicodeEncodeError:
        return True
    return False


def problem_text(message: str) -> str:
    """A compiler's message as text (V8 quotes the offending source, which may hold a lone surrogate)."""
    return message.encode("utf-8", "replace").decode("utf-8") if _not_text(message) else message


def text_problem(run: Run) -> str | None:
    """Which part of ``run`` is not text (``error message``, ``console output``, ``returned request's
    headers``...), or None when all of it is."""
    if run.error is not None and _not_text(run.error):
        return "error message"
    if _not_text(run.logs):
        return "console output"
    request = run.request
    if isinstance(request, dict):
        for key, value in request.items():
            if _not_text(key):
                return "returned request (a field name)"
            if _not_text(value):
                return f"returned request's {key}"
    elif _not_text(request):
        return "returned request"
    return None


def checked(run: Run) -> Run:
    """The run, or a failed one when what the code left is not text (a lone UTF-16 surrogate in a log
    line, the error or the returned request cannot be sent or stored)."""
    where = text_problem(run)
    if where is None:
        return run
    return Run(
        error=f"not valid text in the transform's {where} (a lone UTF-16 surrogate such as \\ud800)",
        duration_ms=run.duration_ms,
    )


def share_batch_time(runs: list[Run], elapsed_ms: float) -> None:
    """Each call of a batch timed as it ran: what V8's clock read for it (``Date.now``, whole milliseconds,
    the only clock a script has: ``Temporal`` reads the same one) plus an equal share of the batch's time
    that those readings leave out. Read alone, a call under a millisecond was 0 ms: every delivery of a
    quick transform, claimed with others, recorded ``duration_ms: 0.0``. The calls' times add up to the
    batch's.

    Whole milliseconds can also read more than the batch took (a sub-millisecond call that crossed a tick
    reads 1): then the batch's time is split by each reading plus the tick it may be off by, so no call of a
    batch that took time is left at 0 (a suite run saw ``[1.0, 0.0, 0.0, 0.0]``)."""
    read = sum(run.duration_ms for run in runs)
    rest = elapsed_ms - read
    if rest >= 0:
        share = rest / len(runs)
        for run in runs:
            run.duration_ms += share
        return
    weights = read + len(runs)
    for run in runs:
        run.duration_ms = elapsed_ms * (run.duration_ms + 1) / weights
