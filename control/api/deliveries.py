"""/v1/endpoints/{id}/deliveries: the outbound attempts of an endpoint, newest first."""

from __future__ import annotations

from typing import Annotated, ClassVar

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from control.api.openapi import errors
from control.records.deliveries import DeliveryList, DeliverySource
from control.service import Context, Principal
from control.service import deliveries as service

__all__ = ("DeliveryController",)


class DeliveryController(Controller):
    path = "/endpoints/{endpoint_id:str}/deliveries"
    tags: ClassVar[list[str]] = ["deliveries"]

    @get("/", operation_id="ListDeliveries", responses=errors(400, 401, 404, 429))
    async def list_deliveries(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: FromPath[str],
        success: Annotated[bool | None, QueryParameter(description="`false` lists the failed attempts")] = None,
        source: Annotated[
            DeliverySource | None, QueryParameter(description="Rule deliveries, replays or manual tests")
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=100, description="Page size")] = 20,
        cursor: Annotated[
            str | None, QueryParameter(description="`next_cursor` of the previous page, unchanged")
        ] = None,
    ) -> DeliveryList:
        """Every outbound attempt (rule deliveries with their retries, replays, manual tests), newest first,
        paged with `next_cursor` (null on the last page)."""
        return await service.list_deliveries(
            ctx, principal, endpoint_id, success=success, source=source, limit=limit, cursor=cursor
        )
