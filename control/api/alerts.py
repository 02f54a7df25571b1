"""/v1/alert-destinations and /v1/alerts: where an account's operational alerts go, and what fired."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, QueryParameter

from control.api.openapi import errors
from control.api.params import AlertDestinationId, Cursor, boolean, query
from control.db.context import Context, Principal
from control.records.alerts import (
    AlertDestination,
    AlertDestinationCreate,
    AlertDestinationCreated,
    AlertDestinationDeleted,
    AlertDestinationList,
    AlertList,
)
from control.records.alerts import AlertDestinationUpdate as Update
from control.records.text import id_pattern
from control.service import alerts as service
from control.support.parameter_messages import PAGE_SIZE

__all__ = ("AlertController", "AlertDestinationController")


class AlertDestinationController(Controller):
    path = "/alert-destinations"
    tags = ("alerts",)

    @get("/", operation_id="ListAlertDestinations", responses=errors(401, 429))
    async def list_alert_destinations(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal]
    ) -> AlertDestinationList:
        """The account's alert destinations, oldest first."""
        return await service.list_alert_destinations(ctx, principal)

    @post("/", operation_id="CreateAlertDestination", responses=errors(400, 401, 403, 429))
    async def create_alert_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        data: JSONBody[AlertDestinationCreate],
    ) -> AlertDestinationCreated:
        """Adds a URL that operational alerts are sent to (`events`: which types, default all; `format`:
        `json` or a Slack incoming-webhook body). Every alert is signed (Standard Webhooks) with the
        `signing_secret` returned here and on rotation only, sent through the egress policy and retried."""
        return await service.create_alert_destination(ctx, principal, data)

    @get("/{alert_destination_id:str}", operation_id="GetAlertDestination", responses=errors(401, 404, 429))
    async def get_alert_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        alert_destination_id: AlertDestinationId,
    ) -> AlertDestination:
        """One alert destination."""
        return await service.get_alert_destination(ctx, principal, alert_destination_id)

    @patch(
        "/{alert_destination_id:str}", operation_id="UpdateAlertDestination", responses=errors(400, 401, 403, 404, 429)
    )
    async def update_alert_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        alert_destination_id: AlertDestinationId,
        data: JSONBody[Update],
    ) -> AlertDestination:
        """Changes `url`, `name`, `events` or `format`; fields left out stay; `events: null` means all types."""
        return await service.update_alert_destination(ctx, principal, alert_destination_id, data)

    @post(
        "/{alert_destination_id:str}/rotate-secret",
        operation_id="RotateAlertDestinationSecret",
        status_code=200,
        responses=errors(401, 403, 404, 429),
    )
    async def rotate_alert_destination_secret(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        alert_destination_id: AlertDestinationId,
    ) -> AlertDestinationCreated:
        """A new `signing_secret` (shown only here and on create); the next attempt of every alert is signed
        with it."""
        return await service.rotate_alert_destination_secret(ctx, principal, alert_destination_id)

    @delete(
        "/{alert_destination_id:str}",
        operation_id="DeleteAlertDestination",
        status_code=200,
        responses=errors(401, 403, 404, 429),
    )
    async def delete_alert_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        alert_destination_id: AlertDestinationId,
    ) -> AlertDestinationDeleted:
        """Deletes the alert destination; the record of alerts sent to it stays."""
        return await service.delete_alert_destination(ctx, principal, alert_destination_id)


class AlertController(Controller):
    path = "/alerts"
    tags = ("alerts",)

    @get("/", operation_id="ListAlerts", responses=errors(400, 401, 404, 410, 429))
    async def list_alerts(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: Annotated[str | None, query("Only this endpoint's alerts", pattern=id_pattern("ep"))] = None,
        open_only: Annotated[
            str | None, query("`true`: only alerts whose condition still holds", kind="boolean", name="open")
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=200, description=PAGE_SIZE)] = 50,
        cursor: Cursor = None,
    ) -> AlertList:
        """What fired, newest first: the type, the endpoint or destination it is about, when it fired and
        resolved, and each send to an alert destination with every attempt (status, latency, error)."""
        return await service.list_alerts(
            ctx,
            principal,
            endpoint_id=endpoint_id,
            open_only=bool(boolean(open_only, "open")),
            limit=limit,
            cursor=cursor,
        )
