"""What goes between the pool and a sandbox process (``control.transform.child``): a ``Call`` (a transform's
source and the JSON inputs of its calls) and an ``Answer`` (a ``Run`` per input, or why the source is not
a transform), msgpack in length-prefixed frames.

Only text crosses: a lone UTF-16 surrogate that JavaScript strings may hold cannot be encoded, so the
sandbox process checks every string it answers with (``text_problem``) and turns a run that left one into
a failed run saying where it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = (
    "MAX_LOGS",
    "MAX_OUTPUT",
    "MAX_SOURCE",
    "MEMORY_LIMIT",
    "TIME_LIMIT_S",
    "Answer",
    "Call",
    "Problem",
    "Run",
    "problem_text",
    "text_problem",
)

_encode = msgspec.msgpack.Encoder().encode

MAX_SOURCE = 65_536
"""Characters of JavaScript a transform may have."""
TIME_LIMIT_S = 1.0
MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes of V8 heap an isolate may use."""
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


class Run(msgspec.Struct, kw_only=True):
    """What one call did: the returned request (None: skip, or an error), or the error and its line."""

    request: Any = None
    error: str | None = None
    line: int | None = None
    logs: list[str] = msgspec.field(default_factory=list)
    logs_truncated: bool = False
    duration_ms: float = 0.0
    stopped: bool = False
    """A limit stopped it (time, memory), or its process died."""
    crashed: bool = False
    """It ended its sandbox process (a V8 fatal error, memory past the OS limit, a signal)."""


class Call(msgspec.Struct, kw_only=True, frozen=True):
    account: str
    """Whose calls: a sandbox process never runs two accounts' calls in one isolate."""
    source: str
    payloads: list[str]
    """JSON ``{"request", "context"}`` per call, or ``{"check": true}`` (load the source, call nothing)."""


class Answer(msgspec.Struct, kw_only=True, frozen=True):
    runs: list[Run] | None = None
    problem: str | None = None
    """Why the source is not a transform (it does not compile), with the ``line`` it names."""
    line: int | None = None


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
