"""Alert records: an account's alert destinations, and the alerts that fired with each send's attempts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

import msgspec

from control.records import Deleted
from control.records.destinations import Url
from control.records.text import Name

__all__ = (
    "ALERT_TYPES",
    "Alert",
    "AlertAttempt",
    "AlertDestination",
    "AlertDestinationCreate",
    "AlertDestinationCreated",
    "AlertDestinationDeleted",
    "AlertDestinationList",
    "AlertDestinationUpdate",
    "AlertFormat",
    "AlertList",
    "AlertSend",
    "AlertType",
)

AlertType = Literal[
    "destination.circuit_opened",
    "destination.recovered",
    "destination.disabled",
    "delivery.exhausted",
    "endpoint.signature_failures",
    "endpoint.silent",
    "dead_letter.added",
]
ALERT_TYPES: tuple[str, ...] = get_args(AlertType)
AlertFormat = Literal["json", "slack"]

Events = Annotated[
    list[AlertType],
    msgspec.Meta(
        min_length=1,
        description="The alert types sent to this destination (default: all of them)",
        extra_json_schema={"uniqueItems": True},
    ),
]
Format = Annotated[
    AlertFormat,
    msgspec.Meta(
        description="`json`: the alert as a JSON object; `slack`: a Slack (or Discord `/slack`) incoming-webhook "
        'body `{"text": ...}` with a readable line. Both are signed.'
    ),
]


class AlertDestinationCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: Url
    name: Name | None = None
    events: Events | None = None
    format: Format = "json"


class AlertDestinationUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays; ``name: null`` clears the name, ``events: null`` means all types."""

    url: Url | msgspec.UnsetType = msgspec.UNSET
    name: Name | msgspec.UnsetType | None = msgspec.UNSET
    events: Events | msgspec.UnsetType | None = msgspec.UNSET
    format: Format | msgspec.UnsetType = msgspec.UNSET


class AlertDestination(msgspec.Struct, kw_only=True):
    id: str
    name: str | None
    url: str
    events: list[AlertType]
    format: AlertFormat
    created_at: datetime
    updated_at: datetime


class AlertDestinationCreated(AlertDestination, kw_only=True):
    """Create and rotate-secret are the only answers that carry the signing secret."""

    signing_secret: str
    """``whsec_`` + base64 of 32 random bytes: verify the alerts' Standard Webhooks signature with it."""


class AlertDestinationList(msgspec.Struct, kw_only=True):
    alert_destinations: list[AlertDestination]


class AlertDestinationDeleted(Deleted, kw_only=True):
    pass


class AlertAttempt(msgspec.Struct, kw_only=True):
    attempt: int
    started_at: datetime
    status: int | None
    """The receiver's response status; null when no response came (``error`` says why)."""
    latency_ms: int
    success: bool
    error: str | None


class AlertSend(msgspec.Struct, kw_only=True):
    """One alert to one alert destination."""

    alert_destination_id: str
    status: Literal["pending", "in_flight", "succeeded", "failed"]
    next_attempt_at: datetime | None
    attempts: list[AlertAttempt]


class Alert(msgspec.Struct, kw_only=True):
    id: str
    """Also the ``webhook-id`` of every send of it: receivers deduplicate retries on it."""
    type: AlertType
    endpoint_id: str | None
    destination_id: str | None
    count: int
    """``delivery.exhausted``: events whose deliveries used up their retries in the hour;
    ``endpoint.signature_failures``: failed signatures in the 5 minutes; ``dead_letter.added``: dead letters."""
    data: dict[str, Any]
    fired_at: datetime
    resolved_at: datetime | None
    """Null while the condition holds: no second alert of it fires until then."""
    sends: list[AlertSend]


class AlertList(msgspec.Struct, kw_only=True):
    alerts: list[Alert]
    next_cursor: str | None = None
