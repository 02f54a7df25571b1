"""Retrying deliveries: one delivery now, or every failed delivery of an endpoint that matches, in bulk.

Neither sends anything itself. A retry makes the delivery's task due now and the deliver worker sends it,
so a retry obeys the destination's concurrency cap and circuit like any delivery, and a slow destination
never holds up the caller. One retry is one more attempt with the next attempt number, whatever the task's
state: after the schedule gave up (``failed``), it fails again if that attempt fails; a pending one just
comes forward; a succeeded one is sent again (a deliberate resend). Replays and destination tests are not
deliveries of a destination's schedule: they are refused (400), and sent again with a replay.

A bulk retry is a job (``control.workers.retries`` advances it): the request only records it and answers
202, or 200 with the unfinished job that has the very same filters. Its filters are the shared event
filters, ``destination_id`` and ``success`` (only ``false``: failed deliveries).

Both make outbound requests on demand, so each call is one of the account's outbound sends
(``control.support.rate_limits``), charged once the request is known to be valid: one retry, one token; a bulk
retry, one token for the job, whose deliveries the deliver workers then pace (a repeated request that finds
the job still running is charged too, as it cannot know that before asking).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec

from control.db import destinations as db_destinations
from control.db import retries as db_retries
from control.db import tasks as db_tasks
from control.db.context import Context, Principal
from control.db.events import EventFilters
from control.records.deliveries import DeliveryRetry, DeliveryRetryFilters, DeliveryRetryJob
from control.service.endpoints import require_endpoint, require_owned, require_write
from control.service.events import read as events_service
from control.service.replay import body_expired_error
from control.support.rate_limits import charge_send
from shared import ids
from shared.errors import ConflictError, NotFoundError, ValidationError
from shared.logs import bind
from shared.tracing import ids_of

__all__ = ("JOB_PREFIX", "get_delivery_retry", "job_filters", "retry_deliveries", "retry_delivery")

JOB_PREFIX = "retry"
"""Bulk retry jobs are ``retry_`` and a ULID."""
_MICRO = timedelta(microseconds=1)
_NOT_RULE = {"replay": "a replay", "manual_test": "a destination test", "listen": "a forward by hookyard listen"}


def _not_a_rule_delivery(delivery_id: str, delivery: asyncpg.Record) -> str:
    """Why a delivery is not retried, and what sends it again. A destination test's event is synthetic (never
    stored: replaying it is a 404), so a test is sent again as a test. Both the MCP tool and the /v1 route
    are named: the service cannot tell which surface called, and a caller of either can use both."""
    source = delivery["source"]
    what = f"{_NOT_RULE.get(source, source)} (source {source!r}), not a rule delivery"
    if source == "manual_test":
        again = (
            f"run the test again with the MCP tool test_destination (destination_id {delivery['destination_id']!r}) "
            f"or POST /v1/destinations/{delivery['destination_id']}/test"
        )
    else:
        again = (
            f"send the event again with the MCP tool replay_event (event_id {delivery['event_id']!r}) or "
            f"POST /v1/events/{delivery['event_id']}/replay"
        )
    return f"delivery_id: {delivery_id!r} is {what}; {again}"


async def retry_delivery(ctx: Context, principal: Principal, delivery_id: str) -> DeliveryRetry:
    """One more attempt of the delivery's event to its destination, due now."""
    require_write(principal)
    async with ctx.pool.acquire() as conn, conn.transaction():
        delivery = await require_owned(
            conn, principal, delivery_id, kind="dlv", noun="delivery", get=db_retries.delivery_for_account
        )
        if delivery["task_id"] is None:
            raise ValidationError(_not_a_rule_delivery(delivery_id, delivery))
        task = await db_tasks.lock_for_retry(conn, delivery["task_id"])
        if task is None:
            raise NotFoundError(f"destination {delivery['destination_id']!r} of delivery {delivery_id!r} was deleted")
        if not task["event_found"]:
            raise NotFoundError(f"event {delivery['event_id']!r} of delivery {delivery_id!r} is no longer stored")
        if task["body_expired_at"] is not None:
            raise body_expired_error(delivery["event_id"], task["body_expired_at"])
        if task["status"] == "in_flight":
            raise ConflictError(
                f"delivery {delivery_id!r} has attempt {task['attempts']} in flight; retry once its outcome is "
                "recorded, if it failed",
                code="attempt_in_flight",
            )
        await charge_send(ctx, principal)  # refused: the transaction rolls back, nothing was made due
        await db_destinations.clear_transform_crash(conn, task["destination_id"])  # a retry asks it to run
        span = _retry_span(ctx, task, delivery_id)
        due = await db_tasks.make_due(conn, task["id"], ctx.tracing.traceparent(span) if span and ctx.tracing else None)
    assert due is not None  # locked above and not in flight
    if span is not None:
        span.set_attribute("hookyard.attempt", due["attempts"] + 1)
        span.end()
    return DeliveryRetry(
        delivery_id=delivery_id,
        event_id=task["event_id"],
        destination_id=task["destination_id"],
        rule_id=task["rule_id"],
        previous_status=task["status"],
        status="pending",
        attempt_number=due["attempts"] + 1,
        due_at=due["next_attempt_at"],
    )


def _retry_span(ctx: Context, task: asyncpg.Record, delivery_id: str) -> Any:
    """When tracing is on: the retry's span, in the event's trace (a child of the span the task's attempts
    were children of); the attempt it brings forward is its child (the task keeps its ``traceparent``)."""
    if ctx.tracing is None:
        return None
    span = ctx.tracing.start(
        "hookyard.retry",
        parent=task["traceparent"],
        attributes={
            "hookyard.event_id": task["event_id"],
            "hookyard.endpoint_id": task["endpoint_id"],
            "hookyard.destination_id": task["destination_id"],
            "hookyard.rule_id": task["rule_id"],
            "hookyard.task_id": task["id"],
            "hookyard.delivery_id": delivery_id,
            "hookyard.retry.previous_status": task["status"],
        },
    )
    if (ids := ids_of(span)) is not None:
        bind(trace_id=ids[0], span_id=ids[1])
    return span


def _filters_key(filters: EventFilters, destination_id: str | None) -> str:
    """The canonical text of normalised filters: equal for requests that select the same deliveries."""
    return msgspec.json.encode(db_retries.filter_values(filters, destination_id)).decode()


def job_filters(row: asyncpg.Record) -> EventFilters:
    """The event filters of a job, as the event list applies them (``q`` made into its SQL form here, by the
    same function as for the list)."""
    return dataclasses.replace(
        events_service.event_filters(q=row["q"]),
        since=row["since"],
        before=row["received_before"],
        provider=row["provider"],
        event_type=row["event_type"],
        method=row["method"],
        signature_valid=row["signature_valid"],
    )


def _job(row: asyncpg.Record) -> DeliveryRetryJob:
    before = row["received_before"]
    return DeliveryRetryJob(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        state=row["state"],
        filters=DeliveryRetryFilters(
            since=row["since"],
            until=None if before is None else before - _MICRO,
            provider=row["provider"],
            type=row["event_type"],
            method=row["method"],
            signature_valid=row["signature_valid"],
            q=row["q"],
            destination_id=row["destination_id"],
        ),
        matched=row["matched"],
        queued=row["queued"],
        done=row["done"],
        failed=row["failed"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        completed_at=row["completed_at"],
    )


async def retry_deliveries(
    ctx: Context,
    principal: Principal,
    endpoint_id: str,
    filters: EventFilters,
    *,
    destination_id: str | None = None,
    success: bool | None = None,
) -> tuple[DeliveryRetryJob, bool]:
    """(the job, True when this call created it): a new job, or the endpoint's unfinished one with the same
    filters (a repeated request while it runs starts nothing more)."""
    require_write(principal)
    if success:
        raise ValidationError(
            "success: only false (deliveries whose latest attempt failed) is retried in bulk; resend a succeeded "
            "delivery with the MCP tool retry_delivery or POST /v1/deliveries/{id}/retry"
        )
    if destination_id is not None and not ids.is_id(destination_id, "dst"):
        raise ValidationError(f"destination_id: {destination_id[:100]!r} is not a destination id (dst_ and a ULID)")
    key = _filters_key(filters, destination_id)
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        if destination_id is not None and not await db_destinations.existing_ids(conn, endpoint_id, [destination_id]):
            raise NotFoundError(f"destination {destination_id!r} not found on endpoint {endpoint_id!r}")
        await charge_send(ctx, principal)
        # A running job that completes between the refused insert and the read leaves room: insert again.
        for _ in range(3):
            job_id = ids.new_id(JOB_PREFIX)
            created = await db_retries.create_job(
                conn, job_id=job_id, endpoint_id=endpoint_id, filters=filters, destination_id=destination_id, key=key
            )
            if created is not None:
                return _job(created), True
            running = await db_retries.running_job(conn, endpoint_id, key)
            if running is not None:
                return _job(running), False
    raise ConflictError("a bulk retry with these filters kept finishing while this one started; send it again")


async def get_delivery_retry(ctx: Context, principal: Principal, retry_id: str) -> DeliveryRetryJob:
    async with ctx.pool.acquire() as conn:
        row = await require_owned(
            conn, principal, retry_id, kind=JOB_PREFIX, noun="delivery retry", get=db_retries.get_job
        )
    return _job(row)
