"""/v1/endpoints/{id}/stats: the endpoint's last 24 hours and its destinations' health."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency

from control.api.openapi import errors
from control.api.params import EndpointId
from control.db.context import Context, Principal
from control.records.stats import EndpointStats
from control.service import stats as service

__all__ = ("EndpointStatsController",)


class EndpointStatsController(Controller):
    path = "/endpoints/{endpoint_id:str}/stats"
    tags = ("stats",)

    @get("/", operation_id="GetEndpointStats", responses=errors(401, 404, 410, 429))
    async def get_stats(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> EndpointStats:
        """The last 24 hours (from the start of the minute 24 hours ago): events in total, per hour, by
        provider and event type, signature failures by reason; the requests the edge refused, by reason
        (`refused`: a rejected signature, a source not on the allowlist); rule delivery attempts, their
        success rate and latency percentiles; and per destination its attempts, success rate, latest attempt,
        consecutive failures and circuit breaker (`open` until `reopens_at`). Counted as events are stored,
        requests refused and attempts recorded: what the flush has not stored yet is not in it."""
        return await service.endpoint_stats(ctx, principal, endpoint_id)
