"""Test-webhook records: which sample to send to an endpoint, and what its edge answered."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from shared.providers import NAMES
from shared.samples import EVENT_TYPES

__all__ = ("TriggerOutcome", "TriggerSample")

_ALL_EVENT_TYPES = sorted({name for names in EVENT_TYPES.values() for name in names})


class TriggerSample(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Which provider's sample to send: the body of ``POST /v1/endpoints/{id}/test-webhook``."""

    provider: Annotated[
        str,
        msgspec.Meta(
            description="Whose webhook to imitate, signed and shaped as that provider sends it: a catalog "
            "provider (docs/reference/providers.md) by its name or an alias (`stripe`, `github`, `slack`...)",
            extra_json_schema={"enum": sorted(NAMES)},
        ),
    ]
    event_type: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=1,
                max_length=200,
                description="The provider's own event name (null or left out: its first one); each provider's "
                "are listed in docs/reference/providers.md and per provider in this schema",
                extra_json_schema={"enum": _ALL_EVENT_TYPES},
            ),
        ]
        | None
    ) = None
    headers: Annotated[
        Literal["provider", "neutral"],
        msgspec.Meta(
            description="Header names: `provider` (default) the real provider's, which its own library reads "
            "(`Stripe-Signature`; `svix-id`/`svix-timestamp`/`svix-signature`; `X-Shopify-*`; `X-GitHub-Event`, "
            "`X-GitHub-Delivery`, `X-Hub-Signature-256`); `neutral` the spec's (`Pay-Signature`, `relay-*`, "
            "`X-Shop-*`, `X-CodeHost-*`)"
        ),
    ] = "provider"

    # Which names each provider sends, as the service checks it: one branch per provider (its aliases with
    # it). An ``anyOf`` of plain branches, not one ``if``/``then`` per name: generators (schemathesis) combine
    # every ``if`` with every other, which past a few dozen names they cannot.
    openapi_extra: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {
                "properties": {
                    "provider": {"enum": sorted(name for name, of in NAMES.items() if of == own)},
                    "event_type": {"enum": [*EVENT_TYPES[own], None]},
                }
            }
            for own in sorted(set(NAMES.values()))
            if own in EVENT_TYPES
        ]
    }


class TriggerOutcome(msgspec.Struct, kw_only=True):
    """What the endpoint's ingest URL answered to the sample. A refusal (signature, allowlist, an expired
    endpoint) is an answer, reported here, not an error of the call."""

    endpoint_id: str
    provider: str
    event_type: str
    ingest_url: str
    idempotency_key: str
    """The provider's delivery id in the sample (``relay-id``, ``X-Shop-Webhook-Id``, body ``id``...)."""
    signature_header: str | None
    """Where the signature went: the provider's header, or the endpoint's custom ``header_name``."""
    status: int | None
    """The edge's HTTP status; null when no answer came back (``error`` says why)."""
    accepted: bool
    """True for a 2xx: the event is captured (``event_id``) and will be routed."""
    event_id: str | None
    """The captured event's id (``evt_``)."""
    stored: Annotated[
        bool,
        msgspec.Meta(description="The event is stored (the answer waits up to 10 s for it): `get_event` finds it"),
    ]
    cursor: Annotated[
        str | None,
        msgspec.Meta(
            description="Pass as `after` to `wait_for_event` (`events/wait`): its first answer is this very event, "
            "stored or not yet; null when the edge accepted nothing"
        ),
    ]
    response: Annotated[
        Any,
        msgspec.Meta(description='The edge\'s JSON answer: `{"ok": true, "id"}`, or the error envelope of a refusal'),
    ]
    error: str | None
