"""Retry tools: one delivery again now, a bulk retry of an endpoint's failed deliveries, and its progress
(``/v1/deliveries/{id}/retry``, ``/v1/endpoints/{id}/deliveries/retry``, ``/v1/delivery-retries/{id}``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.mcp.tools.events import Filters
from control.records.deliveries import DeliveryRetry, DeliveryRetryJob
from control.service import retries as service


@tool("RetryDelivery")
async def retry_delivery(call: Call, delivery_id: str) -> DeliveryRetry:
    """Schedule one more attempt of a rule delivery now (also after its retries gave up); answers at once."""
    return await service.retry_delivery(call.ctx, call.principal, delivery_id)


@tool("RetryDeliveries")
async def retry_deliveries(
    call: Call, endpoint_id: str, filters: Filters, destination_id: str | None = None, success: bool | None = None
) -> DeliveryRetryJob:
    """Retry every failed delivery of an endpoint matching the event filters, as a background job; returns
    the job (the running one if the same filters already have one). Follow it with get_delivery_retry."""
    job, _ = await service.retry_deliveries(
        call.ctx, call.principal, endpoint_id, filters.checked(), destination_id=destination_id, success=success
    )
    return job


@tool("GetDeliveryRetry", read_only=True)
async def get_delivery_retry(call: Call, retry_id: str) -> DeliveryRetryJob:
    """Read a bulk retry's progress: state, matched, queued, done, failed."""
    return await service.get_delivery_retry(call.ctx, call.principal, retry_id)
