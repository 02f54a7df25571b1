"""/v1/endpoints/{id}/deliveries: the outbound attempts of an endpoint, newest first."""

from __future__ import annotations

import typing
from typing import Annotated

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from control.api.openapi import errors
from control.api.params import Cursor, EndpointId, boolean, query
from control.db.context import Context, Principal
from control.records.deliveries import DeliveryList, DeliverySource
from control.records.text import id_pattern
from control.service import deliveries as service
from control.support.parameter_messages import PAGE_SIZE

__all__ = ("DeliveryController",)


class DeliveryController(Controller):
    path = "/endpoints/{endpoint_id:str}/deliveries"
    tags = ("deliveries",)

    @get("/", operation_id="ListDeliveries", responses=errors(400, 401, 404, 410, 429))
    async def list_deliveries(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        # Both read as text and checked here and by the service: Litestar would take "null" for None (and
        # "1" or "True" for a bool), which a query string documented boolean or enum does not allow.
        success: Annotated[str | None, query("`false` lists the failed attempts", kind="boolean")] = None,
        source: Annotated[
            str | None,
            query("Rule deliveries, replays or manual tests", enum=list(typing.get_args(DeliverySource))),
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=100, description=PAGE_SIZE)] = 20,
        cursor: Cursor = None,
        destination_id: Annotated[
            str | None,
            query("Only attempts to this destination (also one deleted since)", pattern=id_pattern("dst")),
        ] = None,
    ) -> DeliveryList:
        """Every outbound attempt of the endpoint, a rule delivery's retries included, newest first, paged
        with `next_cursor` (null on the last page). Each says whether it will be tried again: `retry`
        (`scheduled` with `next_attempt_at`, `in_flight`, `held`, `gave_up`, `retried` or `none`)."""
        return await service.list_deliveries(
            ctx,
            principal,
            endpoint_id,
            success=boolean(success, "success"),
            source=source,
            limit=limit,
            cursor=cursor,
            destination_id=destination_id,
        )
