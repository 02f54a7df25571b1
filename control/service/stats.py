"""Stats: an endpoint's last 24 hours and its destinations' health, read from the counters the flush and
the delivery recorder keep (``control.db.stats``), never from the events or deliveries themselves, so the
answer costs the same with a million of each in the window; and the requests the edges refused, from their
counters in Redis (``shared.refusals``: 25 hashes, one pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec

from control.db import histogram
from control.db import stats as db_stats
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records.stats import (
    DeliveryStats,
    DestinationHealth,
    DestinationStats,
    EndpointStats,
    EventStats,
    EventTypeCount,
    HourCount,
    LatencyPercentiles,
    ProviderCount,
    RefusedRequests,
    SignatureFailures,
)
from control.service.endpoints import require_endpoint
from shared.refusals import IP_NOT_ALLOWED, REASONS, SIGNATURE_REASONS, parse

__all__ = ("KEEP", "WINDOW_HOURS", "destination_health", "endpoint_stats")

WINDOW_HOURS = 24
KEEP = timedelta(hours=WINDOW_HOURS + 1)
"""Counters starting earlier than this before now are never read again (a window starts 24 hours and at most
a minute back); the sweep removes them, with an hour to spare."""


def _rate(succeeded: int, attempts: int) -> float | None:
    return round(succeeded / attempts, 4) if attempts else None


def _latency(counts: Sequence[int] | None) -> LatencyPercentiles:
    counts = counts or ()
    return LatencyPercentiles(
        p50=histogram.percentile(counts, 0.50),
        p95=histogram.percentile(counts, 0.95),
        p99=histogram.percentile(counts, 0.99),
    )


def _events(rows: Sequence[asyncpg.Record], window: db_stats.Window) -> EventStats:
    hours: dict[datetime, int] = {}
    providers: dict[str | None, int] = {}
    types: dict[tuple[str | None, str | None], int] = {}
    failures: dict[str, int] = {}
    for row in rows:
        count = row["count"]
        if row["grouped"] == db_stats.EVENTS_BY_HOUR:
            hours[row["hour"]] = count
        else:
            provider, event_type, failure = row["provider"], row["event_type"], row["failure"]
            providers[provider] = providers.get(provider, 0) + count
            types[provider, event_type] = types.get((provider, event_type), 0) + count
            if failure is not None:
                failures[failure] = failures.get(failure, 0) + count
    first = window.since.replace(minute=0)
    last = window.until.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    per_hour = []
    hour = first
    while hour <= last:
        per_hour.append(HourCount(hour=hour, count=hours.get(hour, 0)))
        hour += timedelta(hours=1)
    return EventStats(
        total=sum(hours.values()),
        per_hour=per_hour,
        by_provider=sorted(
            (ProviderCount(provider=p, count=n) for p, n in providers.items()),
            key=lambda p: (-p.count, p.provider is None, p.provider or ""),
        ),
        by_event_type=sorted(
            (EventTypeCount(provider=p, event_type=t, count=n) for (p, t), n in types.items()),
            key=lambda t: (-t.count, t.provider is None, t.provider or "", t.event_type is None, t.event_type or ""),
        ),
        signature_failures=SignatureFailures(**failures),
    )


async def _refused(ctx: Context, endpoint_id: str, window: db_stats.Window) -> RefusedRequests:
    """The edges' refusals for the endpoint from the window's first minute on (its first hour's hash holds
    earlier minutes too, left out here)."""
    first_minute = int(window.since.timestamp()) // 60
    hours = range(first_minute // 60, int(window.until.timestamp()) // 3600 + 1)
    pipe = ctx.redis.pipeline(transaction=False)
    for hour in hours:
        pipe.hgetall(ctx.keys.edge_refusals(endpoint_id, hour))
    counts = dict.fromkeys(REASONS, 0)
    for hour, fields in zip(hours, await pipe.execute(), strict=True):
        for name, value in fields.items():
            parsed = parse(name)
            if parsed is not None and hour * 60 + parsed[0] >= first_minute:
                counts[parsed[1]] += int(value)
    return RefusedRequests(
        total=sum(counts.values()),
        ip_not_allowed=counts[IP_NOT_ALLOWED],
        signature_invalid=SignatureFailures(**{reason: counts[reason] for reason in SIGNATURE_REASONS}),
    )


def _reopens_at(ctx: Context, circuit: str, opened_at: datetime | None) -> datetime | None:
    if circuit == "closed" or opened_at is None:
        return None
    return opened_at + timedelta(seconds=ctx.settings.circuit_cooldown_s)


def _health(
    ctx: Context, state: db_stats.DestinationState, counts: db_stats.DeliveryCounts | None
) -> DestinationHealth:
    attempts = counts.attempts if counts else 0
    succeeded = counts.succeeded if counts else 0
    return DestinationHealth(
        attempts=attempts,
        succeeded=succeeded,
        failed=attempts - succeeded,
        success_rate=_rate(succeeded, attempts),
        latency_ms=_latency(counts.latency if counts else None),
        last_status=state.last_status,
        last_attempt_at=state.last_attempt_at,
        consecutive_failures=state.consecutive_failures,
        circuit=state.circuit,
        reopens_at=_reopens_at(ctx, state.circuit, state.circuit_opened_at),
        paused_until=state.paused_until,
        fifo_waiting=state.fifo_waiting,
        held=state.held,
    )


async def endpoint_stats(ctx: Context, principal: Principal, endpoint_id: str) -> EndpointStats:
    now = datetime.now(UTC)
    window = db_stats.Window.last(WINDOW_HOURS, now)
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        event_rows = await db_stats.event_counts(conn, endpoint_id, window)
        overall, by_destination = await db_stats.delivery_counts(conn, endpoint_id, window)
        states = await db_stats.destination_states(conn, endpoint_id)
    refused = await _refused(ctx, endpoint_id, window)
    attempted, succeeded = overall.attempts, overall.succeeded
    return EndpointStats(
        endpoint_id=endpoint_id,
        from_=window.since,
        to=now,
        events=_events(event_rows, window),
        refused=refused,
        deliveries=DeliveryStats(
            attempted=attempted,
            succeeded=succeeded,
            failed=attempted - succeeded,
            success_rate=_rate(succeeded, attempted),
            latency_ms=_latency(overall.latency),
        ),
        destinations=[
            DestinationStats(
                destination_id=s.id,
                name=s.name,
                url=s.url,
                **msgspec.structs.asdict(_health(ctx, s, by_destination.get(s.id))),
            )
            for s in states
        ],
    )


async def destination_health(
    ctx: Context, conn: Connection, endpoint_id: str, destination_id: str
) -> DestinationHealth | None:
    """The health of one destination of ``endpoint_id`` (None if it is gone), on the caller's connection."""
    window = db_stats.Window.last(WINDOW_HOURS, datetime.now(UTC))
    states = await db_stats.destination_states(conn, endpoint_id, destination_id)
    if not states:
        return None
    _, by_destination = await db_stats.delivery_counts(conn, endpoint_id, window, destination_id)
    return _health(ctx, states[0], by_destination.get(destination_id))
