"""Delivery records: one outbound attempt (rule delivery, replay, manual test, or a forward ``hookyard
listen`` made and recorded) and the paged list."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from control.records.transforms import TransformRecord

__all__ = (
    "AuthRecord",
    "Delivery",
    "DeliveryList",
    "DeliveryRetry",
    "DeliveryRetryFilters",
    "DeliveryRetryJob",
    "DeliverySource",
    "RetryJobState",
    "RetryState",
)

DeliverySource = Literal["rule", "replay", "manual_test", "listen"]
"""``listen``: a forward by ``hookyard listen`` to a local app, made by the CLI and recorded by it
(``POST /v1/events/{id}/forwards``); its ``request_body`` is null (the event's own body was sent)."""

RetryState = Literal["scheduled", "in_flight", "held", "gave_up", "retried", "none"]
"""Whether a delivery's attempt will be tried again, read from its task when the attempt is read: ``scheduled``
(at ``next_attempt_at``: the retry schedule's next attempt, or one asked for by hand), ``in_flight`` (the next
attempt is being made now), ``held`` (its destination is disabled: enabling it sends the delivery again),
``gave_up`` (the task failed for good: no attempts left, or a failure that is not retried; a retry by hand
can still ask for one more), ``retried`` (a later attempt of the same delivery was made: see that one) and
``none`` (nothing further: delivered, or an attempt with no retry schedule: a replay, a test, a forward)."""


class TokenFetch(msgspec.Struct, kw_only=True):
    """One request an attempt made to its destination's OAuth2 token endpoint (never the token)."""

    reason: str
    """``no token cached``, ``token expired`` or ``the destination answered 401``."""
    status: int | None
    """The token endpoint's HTTP status; null when no answer came (``error`` says why)."""
    latency_ms: int
    expires_in: int | float | None = None
    """The token's lifetime as the endpoint gave it (seconds; an integer stays one)."""
    error: str | None = None


class AuthRecord(msgspec.Struct, kw_only=True):
    """What authenticating to the destination took on this attempt (OAuth2: the token fetches)."""

    type: str
    token_fetches: list[TokenFetch]
    """Empty when a cached token was sent."""
    retried_after_401: bool
    """The destination answered 401 to the cached token: a new one was fetched and the request sent again
    (what is recorded is the second answer)."""


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
    duplicate_of: str | None
    """Set on a rule delivery that was not sent: its destination deduplicates (``deduplicate_window_s``) and
    had already been delivered the event with this id, which has the same provider idempotency key. Such a
    record is a success with no request and no response."""
    created_at: datetime
    transform: TransformRecord | None = None
    """What the destination's (or the replay's) transform did on this attempt; null when none ran. A
    skipped delivery sent nothing (``success`` true, no status); a failed one sent nothing either (``error``
    says why) and is not retried."""
    trace_id: str | None = None
    """The trace of the attempt's event in your tracing backend (OpenTelemetry, when an OTLP endpoint is set);
    null when tracing is off or the trace was not sampled. Search for it, or for ``hookyard.delivery_id``."""
    span_id: str | None = None
    """The attempt's own span in that trace (its ``traceparent`` is what the destination received)."""
    auth: AuthRecord | None = None
    """What authenticating to the destination took (an OAuth2 token fetched, and why); null when nothing is
    to be told. Credentials are never recorded: their headers show ``[redacted]`` in ``request_headers``."""
    retry: RetryState = "none"
    """Whether this attempt will be tried again (``RetryState``): on a failed rule delivery, ``scheduled`` with
    ``next_attempt_at`` until the next attempt is made, ``gave_up`` after the last one."""
    next_attempt_at: datetime | None = None
    """When the next attempt is due (``retry`` is ``scheduled``; it may go out a little later, when its
    destination's circuit, pause or rate limit holds it back); null when nothing further is scheduled."""


class DeliveryList(msgspec.Struct, kw_only=True):
    deliveries: list[Delivery]
    next_cursor: str | None
    """Pass it back as ``cursor`` for the next (older) page; null on the last page."""


class DeliveryRetry(msgspec.Struct, kw_only=True):
    """What a retry of one delivery scheduled: one more attempt of its event to its destination, made by the
    deliver worker soon after (within the destination's concurrency cap, and once its circuit lets it)."""

    delivery_id: str
    """The attempt the retry was asked for (any attempt of the delivery)."""
    event_id: str
    destination_id: str
    rule_id: str
    previous_status: Literal["pending", "failed", "succeeded", "held"]
    """Where the delivery stood: ``failed`` (the schedule had given up), ``pending`` (waiting for its next
    scheduled attempt, now brought forward), ``succeeded`` (the retry is a deliberate resend) or ``held`` (its
    destination is disabled: the claim holds it again, and enabling the destination sends it)."""
    status: Literal["pending"]
    """Its state now: due at ``due_at``, and no longer in the schedule's hands until that attempt is made."""
    attempt_number: int
    """The number the new attempt will carry (``x-hookyard-delivery-attempt``, the delivery record's
    ``attempt_number``)."""
    due_at: datetime


RetryJobState = Literal["scanning", "delivering", "completed"]


class DeliveryRetryFilters(msgspec.Struct, kw_only=True):
    """What a bulk retry selects, normalised: the shared event filters (instants in UTC; ``until`` as the
    last microsecond it includes), the destination, and ``success`` (always false: failed deliveries)."""

    since: datetime | None
    until: datetime | None
    provider: str | None
    type: str | None
    method: str | None
    signature_valid: bool | None
    q: str | None
    destination_id: str | None
    success: bool = False


class DeliveryRetryJob(msgspec.Struct, kw_only=True):
    """A bulk retry: the deliveries of an endpoint whose latest attempt failed and that match ``filters``,
    re-queued page by page for the deliver worker, with the outcome of each new attempt counted."""

    id: str
    endpoint_id: str
    state: RetryJobState
    """``scanning`` (still paging through the endpoint's failed deliveries; ``matched`` grows),
    ``delivering`` (all queued, new attempts still to finish) or ``completed``."""
    filters: DeliveryRetryFilters
    matched: int
    """Deliveries found whose latest attempt failed and that match the filters."""
    queued: int
    """Of those, re-queued for a new attempt now (the others changed meanwhile: in flight, or succeeded)."""
    done: int
    """Queued deliveries whose new attempt succeeded."""
    failed: int
    """Queued deliveries whose new attempt failed (those with attempts left go on with their schedule), or
    whose destination was deleted meanwhile. ``queued - done - failed`` are still waiting for their attempt."""
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
