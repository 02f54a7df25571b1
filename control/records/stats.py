"""Stats records: an endpoint's last 24 hours (volume, signature failures, requests the edge refused,
deliveries, latency) and the health of its destinations, also shown on each destination."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

__all__ = (
    "Circuit",
    "DeliveryStats",
    "DestinationHealth",
    "DestinationStats",
    "EndpointStats",
    "EventStats",
    "EventTypeCount",
    "HourCount",
    "LatencyPercentiles",
    "ProviderCount",
    "RefusedRequests",
    "SignatureFailures",
)

Circuit = Literal["closed", "open", "half_open"]


class HourCount(msgspec.Struct, kw_only=True):
    hour: datetime
    """The hour's start (UTC); the first hour of the window counts only from the window's `from`."""
    count: int


class ProviderCount(msgspec.Struct, kw_only=True):
    provider: str | None
    """Null for unattributed events."""
    count: int


class EventTypeCount(msgspec.Struct, kw_only=True):
    provider: str | None
    event_type: str | None
    """The provider's event name (its first 200 characters); null when the event has none."""
    count: int


class SignatureFailures(msgspec.Struct, kw_only=True):
    """Failed signature checks by `signature_failure_reason` (every reason, 0 when none)."""

    missing_header: int = 0
    malformed_header: int = 0
    malformed_timestamp: int = 0
    timestamp_out_of_tolerance: int = 0
    """A delayed or replayed delivery, not a wrong secret."""
    signature_mismatch: int = 0


class EventStats(msgspec.Struct, kw_only=True):
    total: int
    per_hour: list[HourCount]
    """Every hour of the window, oldest first, empty ones included (25: the first and last are partial)."""
    by_provider: list[ProviderCount]
    """Most events first."""
    by_event_type: list[EventTypeCount]
    """Most events first."""
    signature_failures: SignatureFailures
    """Events stored with a failed check (`on_failure: accept_log`); those the edge refused are in `refused`."""


class RefusedRequests(msgspec.Struct, kw_only=True):
    """Requests the edge refused, by reason, counted as they were refused: nothing of them is stored, except
    a blocked source's request on an endpoint that logs them (`log_blocked_ips`), which is an event too."""

    total: int
    ip_not_allowed: int
    """403 `ip_not_allowed`: the source address is not on the endpoint's allowlist."""
    signature_invalid: SignatureFailures
    """401 `signature_invalid` (`on_failure: reject`), by the failed check's reason."""


class LatencyPercentiles(msgspec.Struct, kw_only=True):
    """Nearest-rank percentiles of the attempts' `latency_ms`: the send alone, from the request to the
    response, without the time a delivery waited before it (docs/reference/stats.md). Each is the upper bound
    of its bucket in a fixed log-scale histogram (bounds 0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40,
    50, 60, 80, 100, ... ms: a 1-1.2-1.5-2-2.5-3-4-5-6-8 series per decade up to 120000): the true value is at
    most this and above the bound below it. Null when nothing was attempted."""

    p50: int | None
    p95: int | None
    p99: int | None


class DeliveryStats(msgspec.Struct, kw_only=True):
    """Rule delivery attempts (first attempts and retries; replays and destination tests are not counted)."""

    attempted: int
    succeeded: int
    failed: int
    success_rate: float | None
    """`succeeded / attempted`, rounded to 4 decimals; null when nothing was attempted."""
    latency_ms: LatencyPercentiles


class DestinationHealth(msgspec.Struct, kw_only=True):
    """A destination's rule delivery attempts in the last 24 hours, its latest attempt, and its circuit
    breaker: after `consecutive_failures` reaches the threshold the circuit opens and its deliveries wait
    (none is lost) until `reopens_at`, when one probe attempt is sent; its success closes the circuit."""

    attempts: int
    succeeded: int
    failed: int
    success_rate: float | None
    """`succeeded / attempts`, rounded to 4 decimals; null when nothing was attempted."""
    latency_ms: LatencyPercentiles
    last_status: int | None
    """HTTP status of the latest rule attempt, whenever it was; null if it got no response or none was made. A
    copy deduplication skipped and a delivery its transform skipped sent nothing: they are not attempts."""
    last_attempt_at: datetime | None
    """Start of the latest rule attempt, whenever it was (also before the 24 hours)."""
    consecutive_failures: int
    circuit: Circuit
    """`open`: deliveries wait; `half_open`: one probe attempt is in flight; `closed`: deliveries flow."""
    reopens_at: datetime | None
    """`open`: when the cool-down ends and the next due delivery goes as the probe (in the past: with the next
    one due); `half_open`: when another probe is tried should this one never answer; null when closed."""
    paused_until: datetime | None
    """The destination answered 429 or 503 with `Retry-After`: no delivery to it starts before this time (null:
    not paused, or the pause is over)."""
    fifo_waiting: int
    """`ordering: fifo`: deliveries waiting behind an earlier one of the same ordering key (0 otherwise)."""
    held: int
    """Deliveries held while the destination is disabled (by a 410 or by hand), sent when it is enabled; 0
    otherwise."""


class DestinationStats(DestinationHealth, kw_only=True):
    destination_id: str
    name: str | None
    url: str


class EndpointStats(msgspec.Struct, kw_only=True):
    """The endpoint's last 24 hours: `from` is the start of the minute 24 hours before `to` (the request)."""

    endpoint_id: str
    from_: datetime = msgspec.field(name="from")
    to: datetime
    events: EventStats
    refused: RefusedRequests
    deliveries: DeliveryStats
    destinations: list[DestinationStats]
    """Every destination of the endpoint, oldest first; attempts to destinations deleted since count in
    `deliveries` only."""
