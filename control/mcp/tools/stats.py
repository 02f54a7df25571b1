"""Stats tool: an endpoint's last 24 hours and its destinations' health (``/v1/endpoints/{id}/stats``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.stats import EndpointStats
from control.service import stats as service


@tool("GetEndpointStats", read_only=True)
async def get_endpoint_stats(call: Call, endpoint_id: str) -> EndpointStats:
    """Read an endpoint's last 24 hours: event volume, signature failures, requests the edge refused,
    delivery success rate and latency, and which destination is failing (its circuit breaker state and when
    it reopens)."""
    return await service.endpoint_stats(call.ctx, call.principal, endpoint_id)
