"""What ``hookyard listen`` reports of a forward it made: the request is the CLI's, the record hookyard's.

``listen`` sends each event to a local app itself (hookyard cannot reach ``localhost`` on the developer's
machine), then records the attempt on its event (``POST /v1/events/{id}/forwards``) as a delivery of source
``listen``, so ``hookyard tail``, the inbox and the deliveries list show what reached the app, as they show
replays. Nothing here is trusted beyond being the caller's account's claim about its own event.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from control.records.destinations import Url
from control.records.replay import REPLAY_HEADER_NAME, REPLAY_HEADER_VALUE
from control.records.text import text

__all__ = ("MAX_FORWARD_RESPONSE", "ForwardReport")

MAX_FORWARD_RESPONSE = 65_536
"""As much of the app's answer as a delivery record keeps of a destination's (64 KiB)."""


SentHeaders = Annotated[
    dict[str, str],
    msgspec.Meta(
        description="The headers sent, as sent (names are recorded lowercased); at most 200",
        extra_json_schema={
            "maxProperties": 200,
            "propertyNames": {"pattern": REPLAY_HEADER_NAME},
            "additionalProperties": {"type": "string", "pattern": REPLAY_HEADER_VALUE},
        },
    ),
]


class ForwardReport(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One forward of an event by ``hookyard listen``: where it went and what came back (a ``status``, or
    an ``error`` saying why there was none)."""

    openapi_extra: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {"required": ["status"], "properties": {"status": {"type": "integer"}}},
            {"required": ["error"], "properties": {"error": {"type": "string"}}},
        ]
    }

    url: Url
    """Where the event was sent."""
    status: (
        Annotated[
            int,
            msgspec.Meta(
                ge=100, le=599, description="The app's HTTP status; null when no response came back (`error` says why)"
            ),
        ]
        | None
    ) = None
    latency_ms: Annotated[
        int, msgspec.Meta(ge=0, le=3_600_000, description="Milliseconds from sending to the answer (or the failure)")
    ] = 0
    error: (
        Annotated[str, text(max_length=1000, description="Why no response came back (connection refused, timeout...)")]
        | None
    ) = None
    sent_headers: SentHeaders = msgspec.field(default_factory=dict)
    """The body sent was the event's own, so none is recorded."""
    response_body: (
        Annotated[
            str, msgspec.Meta(max_length=MAX_FORWARD_RESPONSE, description="The start of the app's answer, as text")
        ]
        | None
    ) = None
