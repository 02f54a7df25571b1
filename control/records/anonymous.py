"""Anonymous provisioning records: ``POST /api/start`` (a temporary endpoint without an account) and
``POST /api/register`` (a free permanent account, optionally claiming a temporary token's endpoints)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from control.records.endpoints import Endpoint
from control.records.events import Kind
from control.records.text import EMAIL, REF, SECRET_FIELD, TEMPORARY_TOKEN, text

__all__ = (
    "EMAIL",
    "TEMPORARY_TOKEN",
    "RegisterRequest",
    "Registered",
    "StartRequest",
    "TemporaryEndpoint",
)

Ref = Annotated[
    str,
    text(
        max_length=200,
        doc_pattern=REF,
        description="The caller's stable name for this endpoint: the same session (cookie) asking again with "
        "the same `ref` gets the same endpoint back. No control characters, no spaces at either end.",
    ),
]
ProviderHint = Annotated[
    Kind,
    msgspec.Meta(
        description="The provider that will send here: kept in the endpoint's name; nothing is configured from it "
        "yet, and a session asking again gets its endpoint unchanged"
    ),
]
Email = Annotated[str, msgspec.Meta(min_length=3, max_length=254, pattern=EMAIL, description="Account e-mail")]
TemporaryToken = Annotated[
    str,
    msgspec.Meta(
        pattern=TEMPORARY_TOKEN,
        description="The `api_token` from /api/start: every endpoint of its account becomes permanent",
        extra_json_schema=SECRET_FIELD,
    ),
]


class StartRequest(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Optional body of ``POST /api/start``; an empty body (or none) is the same as ``{}``."""

    ref: Ref | None = None
    provider_hint: ProviderHint | None = None


class TemporaryEndpoint(msgspec.Struct, kw_only=True, frozen=True):
    """What ``POST /api/start`` answers: the temporary endpoint (docs/reference/agents.md), plus the
    token that reaches it on /mcp and the inbox."""

    endpoint_id: str
    inbox_url: str
    """For a human: opens the live inbox page in any browser until the endpoint expires (a signed link,
    traded for a cookie and dropped from the address bar on opening). Whoever holds it sees the events:
    `rotate_inbox_links` (MCP) ends it and every page opened with it, and answers its replacement."""
    ingest_url: str
    expires_at: datetime
    expires_in_days: int
    """Whole days left, rounded up: 3 for a new endpoint."""
    reused: bool
    api_token: str
    """``hy_tmp_``: works on /mcp and the inbox, 403 ``temporary_token`` on /v1; valid for 3 days from this
    answer. Each answer carries a new one; earlier ones keep working (the newest 20 per account)."""


class RegisterRequest(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    email: Email
    api_token: TemporaryToken | None = None


class Registered(msgspec.Struct, kw_only=True, frozen=True):
    account_id: str
    email: str
    api_key: str
    """``hy_live_``: shown here once, never again."""
    endpoints: list[Endpoint]
    """The endpoints that became permanent with `api_token` (`temporary: false`, `expires_at: null`); empty
    without it."""
