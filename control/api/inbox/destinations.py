"""The inbox page's destination routes, under ``/inbox/{endpoint_id}/`` as its other data routes (the link
cookie is scoped there): the endpoint's destinations with their state, and a disable or enable button each
(``control/static/destinations.js``). The page's own, undocumented: /v1 and /mcp serve every other client."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency

from control.api.inbox.data import HEADERS, inbox_caller, same_origin
from control.api.params import DestinationId, EndpointId
from control.db.context import Context
from control.records.destinations import Destination, DestinationList
from control.service.inbox import destinations as service

__all__ = ("InboxDestinationsController",)


class InboxDestinationsController(Controller):
    path = "/inbox/{endpoint_id:str}/destinations"
    tags = ("provisioning",)

    @get("/", include_in_schema=False)
    async def destinations(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId
    ) -> Response[DestinationList]:
        principal = await inbox_caller(ctx, request, endpoint_id)
        return Response(await service.inbox_destinations(ctx, principal, endpoint_id), headers=HEADERS)

    @post("/{destination_id:str}/disable", status_code=200, include_in_schema=False)
    async def disable(
        self,
        ctx: NamedDependency[Context],
        request: Request[Any, Any, Any],
        endpoint_id: EndpointId,
        destination_id: DestinationId,
    ) -> Response[Destination]:
        return await _set_state(ctx, request, endpoint_id, destination_id, enabled=False)

    @post("/{destination_id:str}/enable", status_code=200, include_in_schema=False)
    async def enable(
        self,
        ctx: NamedDependency[Context],
        request: Request[Any, Any, Any],
        endpoint_id: EndpointId,
        destination_id: DestinationId,
    ) -> Response[Destination]:
        return await _set_state(ctx, request, endpoint_id, destination_id, enabled=True)


async def _set_state(
    ctx: Context, request: Request[Any, Any, Any], endpoint_id: str, destination_id: str, *, enabled: bool
) -> Response[Destination]:
    same_origin(ctx, request)
    principal = await inbox_caller(ctx, request, endpoint_id)
    changed = await service.inbox_destination_state(ctx, principal, endpoint_id, destination_id, enabled=enabled)
    return Response(changed, headers=HEADERS)
