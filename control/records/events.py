"""Event records: a captured inbound request as callers see it, alone, with its deliveries, or paged."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from control.records.deliveries import Delivery
from shared.providers import CATALOG

__all__ = ("Event", "EventList", "EventWait", "EventWithDeliveries", "Kind", "Label", "Provider")

Kind = Literal["identity", "commerce", "payments", "code_host"]
"""The four provider kinds of the spec (the first entries of the catalog)."""
Provider = Annotated[
    str,
    msgspec.Meta(
        description="The provider's name in the catalog (docs/reference/providers.md): one of the four kinds "
        "(`payments` is Stripe, `commerce` Shopify, `code_host` GitHub, `identity` Svix) or a provider's own name",
        extra_json_schema={"enum": [*CATALOG, None]},  # used as `Provider | None`: the enum is the whole value's
    ),
]


class Label(msgspec.Struct, kw_only=True):
    key: str
    value: str
    color: str | None = None


class Event(msgspec.Struct, kw_only=True):
    id: str
    endpoint_id: str
    method: str
    path: str
    """The path after the ingest token, leading slash included, as the sender wrote it (percent escapes
    kept): `/stripe` for `/h/<token>/stripe`, `/` for the bare ingest URL."""
    query: str
    """Raw query string without the leading '?'."""
    headers: dict[str, str]
    """Repeated headers joined with ", "; a value that is not UTF-8 text is the base64 of its exact bytes
    (named in ``header_encodings``)."""
    header_encodings: dict[str, Literal["base64"]]
    """The headers whose value in ``headers`` is base64 (empty when every value is text, the usual case)."""
    body: str | None
    """The raw body: text when it is valid UTF-8, else base64 (see ``body_encoding``); null when empty."""
    body_encoding: Literal["utf8", "base64"]
    body_size: int
    """The body's size in bytes as received (kept when the body expired)."""
    body_expired: bool = False
    """The endpoint's ``body_retention_days`` passed: body and headers were removed, the record stays (and
    cannot be replayed) until the instance's retention."""
    content_type: str | None
    source_ip: str | None
    provider: Provider | None
    """Attributed from the request headers at ingest; null means unattributed, not an error."""
    event_type: str | None
    idempotency_key: str | None
    """The provider's delivery id (stable across its retries): deduplicate on it."""
    signature_valid: bool | None
    signature_failure_reason: str | None
    ip_allowed: bool | None
    received_at: datetime
    labels: list[Label]
    handshake: bool = False
    """A provider's handshake (Slack's url_verification, Meta's hub.challenge...) the edge answered: its
    ``event_type`` names the handshake; it is shown, never routed or delivered."""
    trace_id: str | None = None
    """The webhook's trace in your tracing backend (OpenTelemetry, when an OTLP endpoint is set): the edge's
    ingest span, the routing, every delivery attempt, replay and retry; the sender's own trace when it sent a
    ``traceparent``. Null when tracing is off or the trace was not sampled (docs/reference/observability.md)."""


class EventWithDeliveries(Event, kw_only=True):
    """GET /v1/events/{id} and events/latest: the event with every delivery attempt, oldest first."""

    deliveries: list[Delivery]


class EventList(msgspec.Struct, kw_only=True):
    events: list[Event]
    next_cursor: str | None
    """Pass it back as ``cursor`` for the next (older) page; null on the last page."""


class EventWait(msgspec.Struct, kw_only=True):
    event: Event
    cursor: str | msgspec.UnsetType = msgspec.UNSET
    """With ``after``: the position just after ``event``, to pass as ``after`` next (absent otherwise)."""
