"""Replay and destination-test records: the replay request and the outcome both operations answer with.

The request is documented as the replay service (``control.service.replay``) checks it, no more and no less:
its own messages name the field, so the patterns below are documentation (``extra_json_schema``), not msgspec
checks. They differ from a destination's on purpose: a replay resends a captured request, whose header
values may be any text (sent as UTF-8), and it adds no ``x-hookyard-*`` header of its own, so a caller may
set one. Only the names the HTTP connection owns (``control.records.destinations.HOP_BY_HOP``) are refused.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from control.records.destinations import HOP_BY_HOP, any_case
from control.records.http import HEADER_TOKEN, MAX_HEADER_NAME, Url
from control.records.text import SECRET_FIELD, id_pattern
from control.records.transforms import TransformRecord, TransformSource

__all__ = ("REPLAY_HEADER_NAME", "REPLAY_HEADER_VALUE", "ReplayRequest", "SendOutcome")

REPLAY_HEADER_NAME = f"^{HEADER_TOKEN}{{1,{MAX_HEADER_NAME}}}$"
"""An RFC 9110 field-name (a token), at most 256 characters."""
REPLAY_HEADER_VALUE = r"^[^\x00-\x08\x0a-\x1f\x7f]*$"
"""No control character but tab (CR and LF would split the request). Anything else is text sent as UTF-8."""
_CONNECTION_OWNED = "^(?:" + "|".join(any_case(name) for name in sorted(HOP_BY_HOP)) + ")$"
"""Hop-by-hop names, ``host``, ``content-length`` and ``expect`` in any case: the connection sets them."""

SignatureHeader = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_HEADER_NAME,
        description="Where the recomputed signature goes (with `resign_with`); default: the event's own signature "
        "header (`stripe-signature`, `svix-signature`, ...), `x-signature` for an event of no provider scheme. A "
        "header name, not one of the connection's own (hop-by-hop, `host`, `content-length`, `expect`); checked "
        "even without `resign_with`",
        extra_json_schema={"pattern": REPLAY_HEADER_NAME, "not": {"pattern": _CONNECTION_OWNED}},
    ),
]
Headers = Annotated[
    dict[str, str],
    msgspec.Meta(
        description="Added to what is sent, overriding a captured header of the same name (names are sent "
        "lowercased; of two that differ only in case, the last wins). Hop-by-hop headers, `host`, "
        "`content-length` and `expect` are the connection's own and cannot be given.",
        extra_json_schema={
            "propertyNames": {"pattern": REPLAY_HEADER_NAME, "not": {"pattern": _CONNECTION_OWNED}},
            "additionalProperties": {"type": "string", "pattern": REPLAY_HEADER_VALUE},
        },
    ),
]


class ReplayRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: Url | None = None
    """Where to send it; required unless ``destination_id`` is given (then it may only repeat that URL). A
    replay to a URL sends no credentials, whatever destination has that URL."""
    destination_id: (
        Annotated[
            str,
            msgspec.Meta(
                pattern=id_pattern("dst"),
                description="A destination of the event's endpoint: the replay "
                "goes to its URL with its authentication (`auth`, `tls_ca`), not with its signature or transform",
            ),
        ]
        | None
    ) = None
    preserve_headers: Annotated[
        bool,
        msgspec.Meta(
            description="true: the captured headers (minus hop-by-hop ones, `host` and `content-length`); false: "
            "only the captured `content-type`. `headers` then adds or overrides"
        ),
    ] = True
    headers: Headers = msgspec.field(default_factory=dict)
    body: (
        Annotated[
            str,
            msgspec.Meta(
                description="Replaces the captured body (sent as UTF-8, NUL included: it is content, sent and "
                "recorded as bytes); null: the captured body"
            ),
        ]
        | None
    ) = None
    resign_with: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=16,
                extra_json_schema=SECRET_FIELD,
                description="Secret to re-sign with (see the operation); null: sent with the captured "
                "signature. Any text: never stored, only used as the HMAC key",
            ),
        ]
        | None
    ) = None
    signature_header: SignatureHeader | msgspec.UnsetType = msgspec.UNSET
    """Where the re-signature goes. Absent: the event's own signature header (``stripe-signature`` for
    a payments event captured with Stripe's names, ``svix-signature``, ``x-shopify-hmac-sha256``,
    ``x-hub-signature-256``, or the neutral name it was captured with), where the provider's own library
    looks; ``x-signature`` for an event of no provider scheme (unattributed, no known signature header)."""
    transform: TransformSource | None = None
    """JavaScript applied to this replay alone (as a destination's ``transform``), after ``headers``,
    ``preserve_headers`` and ``body`` and before ``resign_with``: the signature is computed over what it
    returns. Returning null sends nothing."""

    openapi_extra: ClassVar[dict[str, Any]] = {
        # where it goes: a url, or a destination (whose url it is)
        "anyOf": [
            {"required": ["url"], "properties": {"url": {"type": "string"}}},
            {"required": ["destination_id"], "properties": {"destination_id": {"type": "string"}}},
        ]
    }


class SendOutcome(msgspec.Struct, kw_only=True):
    """What one outbound request did. Failures of the request itself are reported here (``success: false``
    with ``error``), not as HTTP errors."""

    id: str
    """The id of the delivery recorded for this request."""
    status: int | None
    """The destination's HTTP status; null when no response came back."""
    latency_ms: int
    success: bool
    """true for a 2xx answer."""
    sent_headers: dict[str, str]
    """The headers exactly as sent (names lowercased), ``host`` and ``content-length`` included."""
    response_body: str | None
    """Up to 64 KiB of the response body: text when valid UTF-8, else base64 (see
    ``response_body_encoding``); null when no response came back."""
    response_body_encoding: Literal["utf8", "base64"]
    error: str | None
    """Why no response came back: connection refused, timeout, refused by the egress policy, the transform
    failed..."""
    transform: TransformRecord | None = None
    """What the replay's ``transform`` did (null without one); ``skipped`` and ``failed`` sent nothing."""
    trace_id: str | None = None
    """The trace this request belongs to (the event's, for a replay), as its delivery record says; null when
    tracing is off or the trace was not sampled."""
    span_id: str | None = None
    """This request's own span in that trace (its ``traceparent`` is what the destination received)."""
