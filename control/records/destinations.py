"""Destination records: the outbound URLs an endpoint's rules forward events to."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from control.records import Deleted
from control.records.destination_auth import AuthShown, DestinationAuth, TlsCa, TlsCaShown
from control.records.http import HEADER_TOKEN, HEADER_VALUE, MAX_HEADER_NAME, Url
from control.records.rules import FIELD_PATTERN, OptionalConditionTree, Rule, RuleName
from control.records.stats import DestinationHealth
from control.records.text import Name, text
from control.records.transforms import TransformSource

__all__ = (
    "HOP_BY_HOP",
    "MAX_HEADERS",
    "MAX_HEADER_VALUE",
    "RESERVED_HEADERS",
    "RESERVED_PREFIX",
    "Destination",
    "DestinationCreate",
    "DestinationCreated",
    "DestinationDeleted",
    "DestinationDetail",
    "DestinationDisable",
    "DestinationList",
    "DestinationUpdate",
    "Ordering",
    "SecretRotation",
    "SigningScheme",
    "Url",
    "any_case",
)

MAX_HEADERS = 50
MAX_HEADER_VALUE = 8192
RESERVED_HEADERS = frozenset(
    {
        # hop-by-hop (RFC 9110 7.6.1) and framing: the HTTP client sets them for each request
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
    }
)
"""Header names a destination cannot set (any case): every delivery sets them itself."""
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        # Not hop-by-hop, but describe the inbound connection rather than the payload: the outbound
        # request gets its own (httpx sets host and content-length; an expectation is never forwarded).
        "host",
        "content-length",
        "expect",
    }
)
"""Header names of a captured request that a delivery, a replay or ``hookyard listen`` never forwards: the
HTTP connection owns them (a replay request may not set them either, ``control.records.replay``)."""
RESERVED_PREFIX = "x-hookyard-"


def any_case(word: str) -> str:
    """A regex matching ``word`` in any case (JSON Schema patterns have no case-insensitive flag)."""
    return "".join(f"[{c.upper()}{c}]" if c.isalpha() else ("\\" + c if c in ".-" else c) for c in word)


_RESERVED_NAME = "^(?:" + "|".join(any_case(n) for n in sorted(RESERVED_HEADERS)) + ")$|^" + any_case(RESERVED_PREFIX)

Headers = Annotated[
    dict[str, str],
    msgspec.Meta(
        description="Sent on every delivery on top of the event's own headers; names are stored lowercased and "
        "must differ in more than case. Hop-by-hop headers, `host`, `content-length` and `x-hookyard-*` cannot "
        "be set. `null` clears them.",
        extra_json_schema={
            "maxProperties": MAX_HEADERS,
            "propertyNames": {
                "pattern": f"^{HEADER_TOKEN}{{1,{MAX_HEADER_NAME}}}$",
                "not": {"pattern": _RESERVED_NAME},
            },
            "additionalProperties": {"type": "string", "maxLength": MAX_HEADER_VALUE, "pattern": HEADER_VALUE},
        },
    ),
]

SignDeliveries = Annotated[
    bool,
    msgspec.Meta(
        description="Sign every delivery to this destination with its own `signing_secret` (Standard Webhooks: "
        "`webhook-id`, `webhook-timestamp`, `webhook-signature`); default true"
    ),
]
PropagateTrace = Annotated[
    bool,
    msgspec.Meta(
        description="When hookyard traces (OpenTelemetry), each delivery carries the W3C `traceparent` (and "
        "`tracestate`) of its attempt's span, so this destination's own tracing continues the webhook's trace; "
        "false sends the captured request's own, if any. Default true"
    ),
]

MAX_RATE_LIMIT_PER_S = 10_000
MIN_RATE_LIMIT_PER_S = 0.001
"""One delivery every 1,000 s (about 17 minutes). Any positive float was taken, and at ``1e-300`` the throttle's
next start lies past the end of time: the destination never delivers (its Redis key's expiry cannot even be
set). A limit slower than this is a schedule, not a rate; and the bound is a decimal, so the document and the
message state it exactly (one an hour, 1/3600, has no finite decimal)."""
MAX_DEDUPLICATE_WINDOW_S = 7 * 86_400

RateLimit = Annotated[
    float,
    msgspec.Meta(
        ge=MIN_RATE_LIMIT_PER_S,
        le=MAX_RATE_LIMIT_PER_S,
        description="Deliveries a second to this destination, retries included, held by every deliver worker "
        "together: 0.001 (one every 1,000 s) to 10000, fractions allowed (0.5 is one every 2 s); `null`: no limit",
    ),
]
Ordering = Literal["none", "fifo"]
OrderingField = Annotated[
    Ordering,
    msgspec.Meta(
        description="`fifo`: deliveries happen in the order the events were received, one in flight at a time "
        "(per `ordering_key` value, when given), a failing one holding back those behind it until it succeeds or "
        "runs out of attempts; default `none`"
    ),
]
OrderingKey = Annotated[
    str,
    text(
        max_length=1000,
        doc_pattern=FIELD_PATTERN,  # checked by the service (control.routing.conditions), which names the problem
        description="With `ordering: fifo`: a field in the condition-tree syntax (`body.<path>`, `header.<name>`, "
        "`meta.<key>`, e.g. `body.data.object.customer`); events are ordered per value of it, in parallel across "
        "values. `null`: one order for the whole destination",
    ),
]
DeduplicateWindow = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=MAX_DEDUPLICATE_WINDOW_S,
        description="Seconds (up to 7 days): an event whose provider idempotency key (`idempotency_key`) was "
        "already delivered to this destination within this window is not sent again; its delivery record names "
        "the event it duplicates (`duplicate_of`). Replays and retries by hand are never deduplicated. `null`: off",
    ),
]


SigningScheme = Literal["hmac", "ed25519"]
SigningSchemeField = Annotated[
    SigningScheme,
    msgspec.Meta(
        description="`hmac`: Standard Webhooks `v1` (HMAC-SHA256 with the `whsec_` signing secret, shown on "
        "create and rotation); `ed25519`: Standard Webhooks `v1a` (an Ed25519 signature; receivers verify it "
        "with `signing_public_key`, `whpk_`, and no secret is ever shown). Default `hmac`"
    ),
]
AuthField = Annotated[
    DestinationAuth,
    msgspec.Meta(
        description="How deliveries authenticate to the destination, by `type`: `basic`, `bearer`, `header`, "
        "`oauth2_client_credentials` or `mtls`. Its secrets are sealed at rest and never returned; reads show "
        "the `type` and the fields that are not secret. `null` clears it."
    ),
]
MAX_OVERLAP_S = 30 * 86_400
DEFAULT_OVERLAP_S = 86_400


class DestinationCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``forward_all`` or ``condition_tree`` also creates a rule forwarding to the new destination (in the same
    transaction); ``rule_name`` names that rule. With neither, the destination has no rule and receives nothing
    until a rule names it. A ``url`` with ``user:pass@`` is stored without it, as
    ``auth`` of type ``basic`` (not both)."""

    url: Url
    name: Name | None = None
    headers: Headers | None = None
    forward_all: Annotated[
        bool,
        msgspec.Meta(description="true: also create a rule forwarding every event of the endpoint here"),
    ] = False
    condition_tree: OptionalConditionTree | msgspec.UnsetType = msgspec.UNSET
    rule_name: (
        Annotated[RuleName, msgspec.Meta(description="Names the rule `forward_all` or `condition_tree` creates")] | None
    ) = None
    sign_deliveries: SignDeliveries = True
    propagate_trace: PropagateTrace = True
    rate_limit_per_s: RateLimit | None = None
    ordering: OrderingField = "none"
    ordering_key: OrderingKey | None = None
    deduplicate_window_s: DeduplicateWindow | None = None
    transform: TransformSource | None = None
    auth: AuthField | None = None
    tls_ca: TlsCa | None = None
    signing_scheme: SigningSchemeField = "hmac"

    openapi_extra: ClassVar[dict[str, Any]] = {
        # forward_all is the tree that matches every event: not both
        "not": {
            "required": ["forward_all", "condition_tree"],
            "properties": {"forward_all": {"const": True}, "condition_tree": {"type": "object"}},
        },
        # rule_name names the rule that forward_all or condition_tree creates
        "if": {"required": ["rule_name"], "properties": {"rule_name": {"type": "string"}}},
        "then": {
            "anyOf": [
                {"required": ["forward_all"], "properties": {"forward_all": {"const": True}}},
                {"required": ["condition_tree"], "properties": {"condition_tree": {"type": "object"}}},
            ]
        },
        # an ordering_key orders a FIFO destination's deliveries: only with ordering fifo
        "allOf": [
            {
                "if": {"required": ["ordering_key"], "properties": {"ordering_key": {"type": "string"}}},
                "then": {"required": ["ordering"], "properties": {"ordering": {"const": "fifo"}}},
            }
        ],
    }


class DestinationUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays as it is; ``name: null`` and ``headers: null`` clear them, as do
    ``rate_limit_per_s: null`` and ``deduplicate_window_s: null`` (off); ``ordering: none`` also clears
    ``ordering_key``."""

    url: Url | msgspec.UnsetType = msgspec.UNSET
    name: Name | msgspec.UnsetType | None = msgspec.UNSET
    headers: Headers | msgspec.UnsetType | None = msgspec.UNSET
    sign_deliveries: SignDeliveries | msgspec.UnsetType = msgspec.UNSET
    propagate_trace: PropagateTrace | msgspec.UnsetType = msgspec.UNSET
    rate_limit_per_s: RateLimit | msgspec.UnsetType | None = msgspec.UNSET
    ordering: OrderingField | msgspec.UnsetType = msgspec.UNSET
    ordering_key: OrderingKey | msgspec.UnsetType | None = msgspec.UNSET
    deduplicate_window_s: DeduplicateWindow | msgspec.UnsetType | None = msgspec.UNSET
    transform: TransformSource | msgspec.UnsetType | None = msgspec.UNSET
    """Replaces the transform (the next attempt runs the new code); ``null`` removes it."""
    auth: AuthField | msgspec.UnsetType | None = msgspec.UNSET
    """Replaces the whole authentication (its secrets too: write them again); ``null`` removes it. A ``url``
    with ``user:pass@`` sets it too."""
    tls_ca: TlsCa | msgspec.UnsetType | None = msgspec.UNSET

    MOVED_FIELDS: ClassVar[dict[str, str]] = {
        "signing_scheme": "not changed by an update: rotating the secret changes it "
        "(POST /v1/destinations/{id}/rotate-secret, MCP rotate_destination_secret, with signing_scheme)",
        "signing_secret": "not set by an update: POST /v1/destinations/{id}/rotate-secret "
        "(MCP rotate_destination_secret) issues a new one",
        "state": "not set by an update: POST /v1/destinations/{id}/enable or /disable "
        "(MCP enable_destination, disable_destination)",
    }
    """What a PATCH names that another operation changes: the 400 says which (``control.support.request_decoding``)."""


class Destination(msgspec.Struct, kw_only=True):
    id: str
    endpoint_id: str
    name: str | None
    url: str
    headers: dict[str, str] | None
    sign_deliveries: bool
    """Deliveries carry hookyard's Standard Webhooks signature, made with the destination's signing secret."""
    propagate_trace: bool = True
    """Deliveries carry the ``traceparent`` of their attempt's span (when hookyard traces)."""
    rate_limit_per_s: float | None
    """Deliveries a second, held by every deliver worker together; null: no limit."""
    ordering: Ordering
    """``fifo``: in the order received, one in flight at a time (per ``ordering_key`` value)."""
    ordering_key: str | None
    """The field FIFO order is kept per value of; null: one order for the destination."""
    deduplicate_window_s: int | None
    """Seconds within which an idempotency key already delivered here is not sent again; null: off."""
    created_at: datetime
    updated_at: datetime
    transform: str | None = None
    """The JavaScript each delivery to this destination runs through (``handler(request, context)``); null
    when deliveries go out as captured."""
    transform_crashed_at: datetime | None = None
    """When the transform ended its sandbox process (a V8 fatal error, memory past the OS limit): its
    deliveries fail without running it until its code changes or a delivery is retried; null: it did not."""
    transform_crash: str | None = None
    """What the sandbox process said as it ended."""
    transform_slowed_at: datetime | None = None
    """Since when each call of the transform waits before it runs, after calls stopped by its limits (time,
    memory) twice in a row or more; null when it does not. It ends when a call ends normally or the code
    changes. Each deliver worker counts its own stops: with several, the last to change it is shown."""
    transform_slowed_s: float | None = None
    """How long each call waits now: 0.5 s, doubling with each further stop, up to 30 s."""
    auth: AuthShown | None = None
    """How deliveries authenticate to the destination: its ``type`` and the fields that are not secret;
    null: no authentication."""
    tls_ca: TlsCaShown | None = None
    """The private CA its certificate must chain to; null: the system's CAs."""
    signing_scheme: SigningScheme = "hmac"
    signing_public_key: str | None = None
    """``whpk_`` + base64 of the Ed25519 public key (``signing_scheme: ed25519``): receivers verify the
    ``v1a`` signature with it. Null for ``hmac``."""
    previous_secret_expires_at: datetime | None = None
    """While a rotation's overlap lasts: until then every delivery carries the previous secret's signature
    too (space separated in ``webhook-signature``); null: no overlap."""
    previous_public_key: str | None = None
    """The previous Ed25519 public key, while its overlap lasts."""
    state: Literal["enabled", "disabled"] = "enabled"
    """``disabled``: nothing is sent; due deliveries are held (no attempt spent) until it is enabled again."""
    disabled_reason: str | None = None
    disabled_at: datetime | None = None


class SecretRotation(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """POST /v1/destinations/{id}/rotate-secret (the body is optional)."""

    overlap_s: Annotated[
        int,
        msgspec.Meta(
            ge=0,
            le=MAX_OVERLAP_S,
            description="Seconds (up to 30 days) during which deliveries carry the previous secret's signature "
            "beside the new one, so receivers can switch at their pace; 0: the previous secret stops at once. "
            "Default 86400 (24 h)",
        ),
    ] = DEFAULT_OVERLAP_S
    signing_scheme: SigningSchemeField | None = None
    """The new secret's scheme; null: the destination's current one. Rotating from ``hmac`` to ``ed25519``
    (or back) with an overlap sends both a ``v1`` and a ``v1a`` signature meanwhile."""


class DestinationDisable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """POST /v1/destinations/{id}/disable (the body is optional)."""

    reason: (
        Annotated[
            str,
            text(max_length=500, description='Shown as `disabled_reason`; null: "disabled through the API"'),
        ]
        | None
    ) = None


class DestinationCreated(Destination, kw_only=True):
    """The destination, plus the rule created with it when the request had ``forward_all`` or
    ``condition_tree`` (absent otherwise). Create and rotate-secret are the only answers that carry the
    signing secret."""

    signing_secret: str | None
    """``whsec_`` + base64 of 32 random bytes: the destination verifies hookyard's deliveries with it (any
    Standard Webhooks library). Null for ``signing_scheme: ed25519``, whose receivers need only
    ``signing_public_key`` (the private key never leaves hookyard)."""
    rule: Rule | msgspec.UnsetType = msgspec.UNSET
    """Absent when the request had neither: the destination then has no rule and receives nothing until a rule
    names it (``POST /v1/endpoints/{id}/rules``)."""


class DestinationDetail(Destination, kw_only=True):
    """One destination as GET /v1/destinations/{id} shows it: with its delivery health."""

    health: DestinationHealth
    """As in the endpoint's stats: the last 24 hours' rule attempts, the latest one, the circuit breaker."""


class DestinationList(msgspec.Struct, kw_only=True):
    destinations: list[Destination]


class DestinationDeleted(Deleted, kw_only=True):
    """Rules that forwarded only to this destination are deleted with it; their ids are listed here."""

    deleted_rule_ids: list[str] = msgspec.field(default_factory=list)
