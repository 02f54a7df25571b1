"""Replay and destination-test records: the replay request and the outcome both operations answer with."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ("ReplayRequest", "SendOutcome")


class ReplayRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: Annotated[str, msgspec.Meta(min_length=1, max_length=2048, description="Absolute http or https URL")]
    preserve_headers: bool = True
    """true: the captured headers (minus hop-by-hop ones, ``host`` and ``content-length``); false: only
    the captured ``content-type``. ``headers`` then adds or overrides."""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    body: str | None = None
    """Replaces the captured body (sent as UTF-8)."""
    resign_with: Annotated[str, msgspec.Meta(min_length=16)] | None = None
    """Secret to re-sign what is actually sent with, in the event's own provider scheme (Standard
    Webhooks for unattributed events)."""
    signature_header: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] = "x-signature"
    """Where the recomputed signature goes (with ``resign_with``)."""


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
    """Why no response came back: connection refused, timeout, refused by the egress policy..."""
