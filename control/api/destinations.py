"""/v1/endpoints/{id}/destinations and /v1/destinations/{id}: where an endpoint's rules forward events."""

from __future__ import annotations

from typing import ClassVar

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import DestinationId, EndpointId
from control.records.destinations import (
    Destination,
    DestinationCreate,
    DestinationCreated,
    DestinationDeleted,
    DestinationDetail,
    DestinationList,
    DestinationUpdate,
)
from control.service import Context, Principal
from control.service import destinations as service

__all__ = ("DestinationController", "EndpointDestinationController")


class EndpointDestinationController(Controller):
    path = "/endpoints/{endpoint_id:str}/destinations"
    tags: ClassVar[list[str]] = ["destinations"]

    @get("/", operation_id="ListDestinations", responses=errors(401, 404, 410, 429))
    async def list_destinations(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> DestinationList:
        """The endpoint's destinations, oldest first."""
        return await service.list_destinations(ctx, principal, endpoint_id)

    @post("/", operation_id="CreateDestination", responses=errors(400, 401, 403, 404, 410, 429))
    async def create_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[DestinationCreate],
    ) -> DestinationCreated:
        """Adds a destination. `forward_all: true` also creates a rule that forwards every future event to
        it; `condition_tree` creates one forwarding the matching events (named `rule_name`, default
        "forward to <name or scheme://host>"). The rule comes back as `rule`; both are created in one
        transaction. `forward_all` and `condition_tree` together are refused."""
        return await service.create_destination(ctx, principal, endpoint_id, data)


class DestinationController(Controller):
    path = "/destinations"
    tags: ClassVar[list[str]] = ["destinations"]

    @get("/{destination_id:str}", operation_id="GetDestination", responses=errors(401, 404, 410, 429))
    async def get_destination(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], destination_id: DestinationId
    ) -> DestinationDetail:
        """The destination with its `health`: the last 24 hours' rule delivery attempts (success rate,
        latency), the latest attempt, and its circuit breaker (open: deliveries wait until `reopens_at`)."""
        return await service.get_destination(ctx, principal, destination_id)

    @post(
        "/{destination_id:str}/rotate-secret",
        operation_id="RotateDestinationSecret",
        status_code=200,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def rotate_destination_secret(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], destination_id: DestinationId
    ) -> DestinationCreated:
        """A new `signing_secret` for hookyard's signature on deliveries to this destination (shown only here
        and on create); the next attempt is signed with it."""
        return await service.rotate_destination_secret(ctx, principal, destination_id)

    @patch("/{destination_id:str}", operation_id="UpdateDestination", responses=errors(400, 401, 403, 404, 410, 429))
    async def update_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        destination_id: DestinationId,
        data: JSONBody[DestinationUpdate],
    ) -> Destination:
        """Changes `url`, `name` or `headers`; fields left out stay; `name: null` and `headers: null` clear
        them. `headers` replaces the whole set."""
        return await service.update_destination(ctx, principal, destination_id, data)

    @delete(
        "/{destination_id:str}",
        operation_id="DeleteDestination",
        status_code=200,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def delete_destination(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], destination_id: DestinationId
    ) -> DestinationDeleted:
        """Deletes the destination and its pending deliveries (past attempts stay in the delivery log). Rules
        that forwarded to it alone are deleted with it (`deleted_rule_ids`); other rules just lose it."""
        return await service.delete_destination(ctx, principal, destination_id)
