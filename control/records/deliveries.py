"""Delivery records: one outbound attempt (rule delivery, replay or manual test) and the paged list."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

__all__ = ("Delivery", "DeliveryList", "DeliverySource")

DeliverySource = Literal["rule", "replay", "manual_test"]


class Delivery(msgspec.Struct, kw_only=True):
    id: str
    event_id: str
    destination_id: str | None
    """Null for a replay to a URL that is not one of the endpoint's destinations."""
    destination_name: str | None
    destination_url: str | None
    rule_id: str | None
    source: DeliverySource
    attempt_number: int
    request_headers: dict[str, str] | None
    """What went on the wire; text that Postgres cannot hold (NUL, lone surrogates) shows as U+FFFD."""
    request_body: str | None
    """The exact body sent: text when it is valid UTF-8, else base64 (see ``request_body_encoding``); null
    when empty."""
    request_body_encoding: Literal["utf8", "base64"]
    response_status: int | None
    """Null when no response came back (connect error, timeout); ``error`` then says why."""
    response_body: str | None
    """Up to 64 KiB of the response body as received (decompressed): text when valid UTF-8, else base64
    (see ``response_body_encoding``); null when no response came back."""
    response_body_encoding: Literal["utf8", "base64"]
    latency_ms: int | None
    success: bool
    error: str | None
    created_at: datetime


class DeliveryList(msgspec.Struct, kw_only=True):
    deliveries: list[Delivery]
    next_cursor: str | None
    """Pass it back as ``cursor`` for the next (older) page; null on the last page."""
