"""Trust records: an endpoint's inbound signature verification (auth config) and its source-IP allowlist."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from control.records.http import HEADER_NAME
from control.records.text import SECRET, SECRET_FIELD, text
from shared.providers import NAMES

__all__ = (
    "MAX_TOLERANCE_SECONDS",
    "AllowlistCreate",
    "AllowlistEntry",
    "AllowlistList",
    "AuthConfig",
    "AuthConfigUpdate",
    "OnFailure",
)

OnFailure = Literal["reject", "accept_log"]
MAX_TOLERANCE_SECONDS = 30 * 24 * 3600
"""30 days: longer than any provider retries a delivery, so a larger value can only be a mistake."""

Secret = Annotated[
    str,
    text(
        min_length=16,
        max_length=1024,
        doc_pattern=SECRET,
        description="The provider's own signing secret, or its public key for an Ed25519 or ECDSA P-256 "
        "scheme (PEM, or the provider's own hex or base64 encoding) (write-only; never returned). `null` clears "
        "it, and verification falls back to the endpoint's platform signing secret. No NUL; neither whitespace "
        "nor a control character at either end.",
        **SECRET_FIELD,
    ),
]
# RFC 9110 field-name = token; stored lowercased, as the edge sees header names.
HeaderName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=100,
        pattern=HEADER_NAME,
        description="A custom header carrying the signature (scheme detected from its value's shape); "
        "`null` detects the scheme from the standard provider headers",
    ),
]
ProviderName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=40,
        description="A provider of the catalog (docs/reference/providers.md), by its name or an alias "
        "(`stripe`, `slack`...): its scheme is checked and its handshake answered; `null` recognises it from "
        "the request's headers",
        extra_json_schema={"enum": sorted(NAMES)},
    ),
]
VerifyToken = Annotated[
    str,
    text(
        min_length=1,
        max_length=256,
        doc_pattern=SECRET,
        description="What the provider echoes in its GET challenge (Meta's `hub.verify_token`; write-only). "
        "`null` clears it",
        **SECRET_FIELD,
    ),
]
Tolerance = Annotated[
    int,
    msgspec.Meta(ge=1, le=MAX_TOLERANCE_SECONDS, description="Largest accepted age of a signed timestamp"),
]


HmacEnabled = Annotated[
    bool,
    msgspec.Meta(
        description="true: a request's signature decides (see `on_failure`); false: it is checked and reported "
        "(`signature_valid` true, or null when it fails), never refused"
    ),
]
OnFailureSetting = Annotated[
    OnFailure,
    msgspec.Meta(
        description="With `hmac_enabled`, a request that fails verification: `reject` answers 401 and stores "
        "nothing; `accept_log` stores it with `signature_valid: false` and its `signature_failure_reason`"
    ),
]
LogBlockedIps = Annotated[
    bool,
    msgspec.Meta(
        description="Requests the allowlist blocks are refused (403) either way; true also stores them "
        "(`ip_allowed: false`, never routed)"
    ),
]


class AuthConfig(msgspec.Struct, kw_only=True):
    """How an endpoint verifies inbound requests. The secret itself is never part of any answer."""

    hmac_enabled: bool
    header_name: str | None
    tolerance_seconds: int
    on_failure: OnFailure
    log_blocked_ips: bool
    secret_set: bool
    """True when a secret was set through PATCH; false means the platform signing secret is used."""
    provider: str | None
    """The catalog provider checked and answered for this endpoint (its own name); null: recognised per request."""
    verify_token_set: bool
    """True when a verify token is set (it is never returned)."""


class AuthConfigUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays as it is; ``secret: null`` and ``header_name: null`` clear."""

    hmac_enabled: HmacEnabled | msgspec.UnsetType = msgspec.UNSET
    secret: Secret | msgspec.UnsetType | None = msgspec.UNSET
    header_name: HeaderName | msgspec.UnsetType | None = msgspec.UNSET
    tolerance_seconds: Tolerance | msgspec.UnsetType = msgspec.UNSET
    on_failure: OnFailureSetting | msgspec.UnsetType = msgspec.UNSET
    log_blocked_ips: LogBlockedIps | msgspec.UnsetType = msgspec.UNSET
    provider: ProviderName | msgspec.UnsetType | None = msgspec.UNSET
    verify_token: VerifyToken | msgspec.UnsetType | None = msgspec.UNSET


class AllowlistCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    cidr: Annotated[
        str,
        text(
            max_length=100,
            # Not a standard format: an IPv4 or IPv6 address, or a range whose host bits are all zero (which
            # excludes NUL; a pattern besides would make clients generate from it instead of the format).
            format="cidr",
            doc_pattern=None,
            description="An IPv4 or IPv6 address (a /32 or /128) or CIDR range, e.g. `203.0.113.0/24`; a range "
            "with host bits set (`10.0.0.1/8`) or an IPv6 zone index is refused",
        ),
    ]


class AllowlistEntry(msgspec.Struct, kw_only=True):
    id: str
    endpoint_id: str
    cidr: str
    """Canonical form, always with its prefix length (`203.0.113.7/32`, `2001:db8::/32`)."""
    created_at: datetime


class AllowlistList(msgspec.Struct, kw_only=True):
    allowlist: list[AllowlistEntry]
    """Oldest first. Empty: every source is allowed; non-empty: only covered sources are."""
