"""Endpoint records: what callers send (create, update) and what they get back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from control.records.text import ExternalRef, Name, meaning

__all__ = (
    "Endpoint",
    "EndpointCreate",
    "EndpointCreated",
    "EndpointList",
    "EndpointResponse",
    "EndpointUpdate",
    "Environment",
)

MAX_RESPONSE_BODY = 4096
"""Characters of a custom answer's body: what a provider expects back is short, and the edge holds it per endpoint."""

Environment = Annotated[
    Literal["production", "staging", "sandbox", "development"],
    msgspec.Meta(
        description="The endpoint's environment: a label to filter by and route on (a rule can name `environment`)"
    ),
]
ExpectEventWithin = Annotated[
    int,
    msgspec.Meta(
        ge=60,
        le=30 * 86_400,
        description="Raise an `endpoint.silent` alert when nothing arrived for this many seconds (null: never)",
    ),
]
BodyRetentionDays = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=3650,
        description="Remove event bodies and headers (and their deliveries' bodies) after this many days, "
        "keeping the event and delivery records until the instance's retention (null: the instance's retention)",
    ),
]
SignatureFailureThreshold = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=1_000_000,
        description="Raise an `endpoint.signature_failures` alert at this many failed signatures in 5 minutes",
    ),
]


class EndpointCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    environment: Environment = "production"
    external_ref: ExternalRef | None = None
    temporary: Annotated[
        bool,
        msgspec.Meta(
            description="Expire in 3 days like an /api/start endpoint (410, then removed with its events); "
            "`hookyard listen --start` makes one"
        ),
    ] = False


class EndpointResponse(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What a sender gets once its request is stored, instead of ``{"ok": true, "id"}`` (a provider that wants
    a particular answer). Always a 2xx: any other status would tell the sender it was not stored. A
    provider's handshake still gets its own answer."""

    status: Annotated[int, msgspec.Meta(ge=200, le=299, description="A 2xx status (the request is stored)")] = 200
    content_type: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=100,
            pattern=meaning(
                r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(; ?[A-Za-z0-9!#$&^_.+-]+=[A-Za-z0-9!#$&^_.+-]+)*$",
                "must be a media type: type/subtype, then any ; name=value parameters (text/plain; charset=utf-8)",
            ),
            description="Its media type, e.g. `text/plain; charset=utf-8`",
        ),
    ] = "text/plain; charset=utf-8"
    body: Annotated[
        str, msgspec.Meta(max_length=MAX_RESPONSE_BODY, description="At most 4,096 characters, sent as UTF-8")
    ] = ""


class EndpointUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays as it is; ``external_ref: null`` clears the ref."""

    name: Name | msgspec.UnsetType = msgspec.UNSET
    environment: Environment | msgspec.UnsetType = msgspec.UNSET
    external_ref: ExternalRef | msgspec.UnsetType | None = msgspec.UNSET
    expect_event_within_s: ExpectEventWithin | msgspec.UnsetType | None = msgspec.UNSET
    signature_failure_alert_threshold: SignatureFailureThreshold | msgspec.UnsetType = msgspec.UNSET
    body_retention_days: BodyRetentionDays | msgspec.UnsetType | None = msgspec.UNSET
    response: (
        Annotated[
            EndpointResponse,
            msgspec.Meta(
                description="What a sender gets once its request is stored (a 2xx status, headers, a body); "
                '`null` restores the usual answer, `{"ok": true, "id": "evt_..."}`'
            ),
        ]
        | msgspec.UnsetType
        | None
    ) = msgspec.UNSET


class Endpoint(msgspec.Struct, kw_only=True):
    id: str
    name: str
    environment: Environment
    external_ref: str | None
    ingest_url: str
    temporary: bool
    expires_at: datetime | None
    expect_event_within_s: int | None = None
    signature_failure_alert_threshold: int = 10
    body_retention_days: int | None = None
    """Days an event keeps its body and headers (null: as long as the event, the instance's retention)."""
    response: EndpointResponse | None = None
    """What a sender gets once its request is stored; null: ``{"ok": true, "id": "evt_..."}``."""
    created_at: datetime
    updated_at: datetime


class EndpointCreated(Endpoint, kw_only=True):
    """Create (and rotate-secret) are the only answers that carry the platform signing secret."""

    signing_secret: str


class EndpointList(msgspec.Struct, kw_only=True):
    endpoints: list[Endpoint]
