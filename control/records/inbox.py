"""Inbox records: the signed link that opens an endpoint's inbox page, the rows of the page's live list, and
its banner of open alerts.

A row is an event without its headers and body (which the detail view loads one at a time): a list of
100 events with bodies of up to 1 MiB each must not travel to a browser that shows one line per event."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from control.records.events import Label, Provider

__all__ = ("InboxAlert", "InboxAlertList", "InboxEvent", "InboxEventList", "InboxLink", "InboxReplayTarget")


class InboxLink(msgspec.Struct, kw_only=True):
    url: str
    """Open it in a browser before `expires_at`: it sets a cookie for this endpoint's inbox only (valid for 12
    hours) and redirects to the inbox page. It works for whoever holds it, any number of times until it
    expires: hand it only to the person who should see the endpoint's events."""
    expires_at: datetime


class InboxEvent(msgspec.Struct, kw_only=True):
    """One line of the inbox list."""

    id: str
    method: str
    path: str
    query: str
    content_type: str | None
    provider: Provider | None
    event_type: str | None
    signature_valid: bool | None
    signature_failure_reason: str | None
    ip_allowed: bool | None
    source_ip: str | None
    """The sender's address, as the edge saw it (behind a trusted proxy, from ``X-Forwarded-For``)."""
    received_at: datetime
    size: int
    """The body's length in bytes (0 when empty)."""
    body_encoding: Literal["utf8", "base64"]
    labels: list[Label]
    handshake: bool = False
    """A provider's handshake the edge answered: shown, never delivered."""


class InboxEventList(msgspec.Struct, kw_only=True):
    events: list[InboxEvent]
    next_cursor: str | None


class InboxReplayTarget(msgspec.Struct, kw_only=True):
    """Where the replay box starts: the URL this endpoint's events were last sent to by ``hookyard listen``
    or by a replay; null when none was (or it was long ago)."""

    url: str | None


class InboxAlert(msgspec.Struct, kw_only=True):
    """One open alert of the endpoint, as the page's banner shows it (``GET /v1/alerts`` has the sends)."""

    id: str
    type: str
    since: datetime
    """When it fired: the condition has held since then."""
    destination_id: str | None
    destination_name: str | None
    """The destination's name now (as it was when the alert fired, once the destination is deleted)."""
    count: int
    text: str
    """What is wrong, in a sentence (the line of a ``slack`` alert)."""


class InboxAlertList(msgspec.Struct, kw_only=True):
    alerts: list[InboxAlert]
