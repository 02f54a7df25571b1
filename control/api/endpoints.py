"""/v1/endpoints: create, list, read, change and delete ingest endpoints."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import EndpointId, query, ref_schema
from control.db.context import Context, Principal
from control.records import Deleted
from control.records.endpoints import Endpoint, EndpointCreate, EndpointCreated, EndpointList, EndpointUpdate
from control.service import endpoints as service

__all__ = ("EndpointController",)


class EndpointController(Controller):
    path = "/endpoints"
    tags = ("endpoints",)

    @get("/", operation_id="ListEndpoints", responses=errors(400, 401, 429))
    async def list_endpoints(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        external_ref: Annotated[
            str | None, query("Only the endpoint with this caller-chosen name", **ref_schema())
        ] = None,
    ) -> EndpointList:
        """Lists the account's endpoints, newest first; `external_ref` re-finds one by its stable name."""
        return await service.list_endpoints(ctx, principal, external_ref=external_ref)

    @post("/", operation_id="CreateEndpoint", responses=errors(400, 401, 403, 409, 429))
    async def create_endpoint(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], data: JSONBody[EndpointCreate]
    ) -> EndpointCreated:
        """Creates an endpoint. The answer carries `ingest_url` for the provider and the platform
        `signing_secret`, which is shown here and on rotation only."""
        return await service.create_endpoint(ctx, principal, data)

    @get("/{endpoint_id:str}", operation_id="GetEndpoint", responses=errors(401, 404, 410, 429))
    async def get_endpoint(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> Endpoint:
        return await service.get_endpoint(ctx, principal, endpoint_id)

    @patch("/{endpoint_id:str}", operation_id="UpdateEndpoint", responses=errors(400, 401, 403, 404, 409, 410, 429))
    async def update_endpoint(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[EndpointUpdate],
    ) -> Endpoint:
        """Changes any of the endpoint's settings (`name`, `environment`, `external_ref`, `expect_event_within_s`,
        `signature_failure_alert_threshold`, `body_retention_days`, `response`); fields left out stay; `null`
        clears a field that takes it (`external_ref`, `expect_event_within_s`, `body_retention_days`,
        `response`)."""
        return await service.update_endpoint(ctx, principal, endpoint_id, data)

    @delete(
        "/{endpoint_id:str}", operation_id="DeleteEndpoint", status_code=200, responses=errors(401, 403, 404, 410, 429)
    )
    async def delete_endpoint(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> Deleted:
        """Deletes the endpoint with all its events, deliveries, destinations, rules and settings."""
        return Deleted(id=await service.delete_endpoint(ctx, principal, endpoint_id))
