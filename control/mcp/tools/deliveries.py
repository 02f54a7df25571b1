"""Delivery tools: the outbound attempts of an endpoint (``/v1/endpoints/{id}/deliveries``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.deliveries import DeliveryList
from control.service import deliveries as service


@tool("ListDeliveries", read_only=True)
async def list_deliveries(
    call: Call,
    endpoint_id: str,
    success: bool | None = None,
    source: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
    destination_id: str | None = None,
) -> DeliveryList:
    """List an endpoint's outbound attempts (rule deliveries, replays, tests), newest first; `success: false`
    lists the failures, `destination_id` the attempts to one destination. Each says whether it is tried again:
    `retry` (`scheduled` at `next_attempt_at`, `in_flight`, `held`, `gave_up`, `retried`, `none`)."""
    return await service.list_deliveries(
        call.ctx,
        call.principal,
        endpoint_id,
        success=success,
        source=source,
        limit=limit,
        cursor=cursor,
        destination_id=destination_id,
    )
