"""/v1/endpoints/{id}/destinations and /v1/destinations/{id}: where an endpoint's rules forward events."""

from __future__ import annotations

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import DestinationId, EndpointId
from control.api.public import OptionalBody
from control.db.context import Context, Principal
from control.records.destinations import (
    Destination,
    DestinationCreate,
    DestinationCreated,
    DestinationDeleted,
    DestinationDetail,
    DestinationDisable,
    DestinationList,
    DestinationUpdate,
    SecretRotation,
)
from control.service.destinations import crud as service
from control.service.destinations import disable_enable as state
from control.service.destinations import signing

__all__ = ("DestinationController", "EndpointDestinationController")

_DEFAULT_ROTATION = SecretRotation()
_NO_REASON = DestinationDisable()


class EndpointDestinationController(Controller):
    path = "/endpoints/{endpoint_id:str}/destinations"
    tags = ("destinations",)

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
    tags = ("destinations",)

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
        operation_class=OptionalBody,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def rotate_destination_secret(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        destination_id: DestinationId,
        data: JSONBody[SecretRotation] = _DEFAULT_ROTATION,
    ) -> DestinationCreated:
        """A new signing secret for hookyard's signature on deliveries to this destination; the next attempt
        is signed with it. For `hmac` the new `signing_secret` is shown only here (and on create); for
        `ed25519` read the new `signing_public_key` (`whpk_`). The previous secret keeps signing beside it for
        `overlap_s` (default 86400, 24 h; 0: not at all): every delivery carries both signatures, space
        separated in `webhook-signature`, so a receiver holding either verifies it. `signing_scheme` switches
        between `hmac` (`v1`) and `ed25519` (`v1a`)."""
        return await signing.rotate_destination_secret(ctx, principal, destination_id, data)

    @post(
        "/{destination_id:str}/disable",
        operation_id="DisableDestination",
        status_code=200,
        operation_class=OptionalBody,
        responses=errors(400, 401, 403, 404, 410, 429),
    )
    async def disable_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        destination_id: DestinationId,
        data: JSONBody[DestinationDisable] = _NO_REASON,
    ) -> Destination:
        """Stops deliveries to the destination (`state: disabled`, with `disabled_reason` and `disabled_at`):
        nothing is sent to it, its due deliveries and those routed meanwhile are held (no attempt spent, its
        circuit untouched), and a `destination.disabled` alert is open until it is enabled. A destination that
        answers 410 Gone is disabled the same way by the worker."""
        return await state.disable_destination(ctx, principal, destination_id, data)

    @post(
        "/{destination_id:str}/enable",
        operation_id="EnableDestination",
        status_code=200,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def enable_destination(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], destination_id: DestinationId
    ) -> Destination:
        """Resumes deliveries: the held ones go out at once, in order for a FIFO destination, and its circuit
        starts closed. Enabling an enabled destination changes nothing."""
        return await state.enable_destination(ctx, principal, destination_id)

    @patch("/{destination_id:str}", operation_id="UpdateDestination", responses=errors(400, 401, 403, 404, 410, 429))
    async def update_destination(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        destination_id: DestinationId,
        data: JSONBody[DestinationUpdate],
    ) -> Destination:
        """Changes the destination; fields left out stay; `null` clears `name`, `headers`, `auth`, `tls_ca` and
        the other nullable fields. `headers` replaces the whole set, `auth` the whole authentication (its
        secrets too). A `url` with `user:pass@` is stored without it, as `auth` of type `basic`."""
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
