"""Transform records: the source a destination or a replay carries, what a run did, and the dry run."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from control.records.text import text

__all__ = (
    "MAX_TRANSFORM",
    "TransformError",
    "TransformRecord",
    "TransformRequest",
    "TransformSource",
    "TransformTest",
    "TransformTestResult",
)

MAX_TRANSFORM = 65_536

TransformSource = Annotated[
    str,
    text(
        max_length=MAX_TRANSFORM,
        description="JavaScript (at most 64 KB) defining `function handler(request, context)`, which returns the "
        "request to send (`{method, path, query, headers, body}`, any field changed) or `null` to skip. Runs in a "
        "sandbox (V8, strict mode): no network, files, timers or modules; 1 s and 64 MB per call; `console.log` "
        "output kept (4 KB). Checked on write: a syntax error is a 400 naming the line.",
        examples=["function handler(request, context) {\n  request.headers['x-env'] = 'prod';\n  return request;\n}"],
    ),
]


class TransformRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A request as a transform sees and returns it."""

    method: Annotated[str, msgspec.Meta(min_length=1, max_length=32)] = "POST"
    path: Annotated[str, msgspec.Meta(max_length=2048)] = "/"
    """The path of the URL it goes to (the destination's); a changed path is sent to the same origin."""
    query: Annotated[str, msgspec.Meta(max_length=2048)] = ""
    """The URL's query string, without `?`."""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Names lowercased. Hop-by-hop headers, `host` and `content-length` belong to the connection."""
    body: Any = ""
    """Parsed JSON when the event is JSON (its content type says so and it parses), else the body as text; a
    non-string body a transform returns is sent as JSON."""


class TransformError(msgspec.Struct, kw_only=True):
    message: str
    """What was thrown (``TypeError: ...``), what was wrong with the returned request, or which limit stopped
    the call."""
    line: int | None
    """The line of the transform's source it points at, when known."""


class TransformRecord(msgspec.Struct, kw_only=True):
    """What the transform did on one attempt (a delivery's ``transform``): every field on every attempt, as
    transforms.md promises (``error: null``, ``logs: []`` included), stored and answered alike. A record
    stored while it omitted its defaults reads with them filled in (``control.service.deliveries``)."""

    outcome: Literal["applied", "skipped", "failed"]
    """``applied``: what was sent is the returned request; ``skipped``: it returned null, nothing was sent;
    ``failed``: it threw, returned something that cannot be sent, or was stopped by a limit; nothing was sent
    and the delivery is not retried (the same input gives the same result; retry it after changing the code),
    unless the call never ran (no sandbox turn in time: retried on the schedule)."""
    error: TransformError | None = None
    logs: list[str] = msgspec.field(default_factory=list)
    """``console.log`` (and ``info``, ``warn``, ``error``, ``debug``) lines, at most 4 KB in all."""
    logs_truncated: bool = False
    duration_ms: float = 0.0


class TransformTest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A dry run: ``transform`` run on a stored event as a delivery would see it (``event_id``, with
    ``destination_id`` for that destination's URL and headers), or on a ``request`` given here; with both,
    on the given request in the stored event's context."""

    transform: TransformSource
    event_id: Annotated[str, msgspec.Meta(description="A stored event to run the transform on")] | None = None
    destination_id: (
        Annotated[str, msgspec.Meta(description="With `event_id`: as this destination's delivery sees it")] | None
    ) = None
    request: (
        Annotated[
            TransformRequest,
            msgspec.Meta(description="A request to run the transform on (with `event_id`, in that event's context)"),
        ]
        | None
    ) = None

    openapi_extra: ClassVar[dict[str, Any]] = {
        # a stored event, a request given here, or both; a destination only with an event (one of its endpoint's)
        "anyOf": [
            {"required": ["event_id"], "properties": {"event_id": {"type": "string"}}},
            {"required": ["request"], "properties": {"request": {"type": "object"}}},
        ],
        "if": {"required": ["destination_id"], "properties": {"destination_id": {"type": "string"}}},
        "then": {"required": ["event_id"], "properties": {"event_id": {"type": "string"}}},
    }


class TransformTestResult(msgspec.Struct, kw_only=True):
    """What the transform returned, without sending anything."""

    request: TransformRequest | None
    """The request a delivery would send (headers hookyard adds afterwards, such as its signature and
    ``x-hookyard-*``, are not shown); null when the transform skips, or failed (see ``error``)."""
    skipped: bool
    """true when ``handler`` returned null: the delivery would be skipped."""
    logs: list[str]
    logs_truncated: bool
    error: TransformError | None
    duration_ms: float
