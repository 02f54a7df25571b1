"""/v1/endpoints/{id}/auth-config: inbound signature verification, and rotation of the platform secret."""

from __future__ import annotations

from litestar import Controller, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import EndpointId
from control.db.context import Context, Principal
from control.records.endpoints import EndpointCreated
from control.records.trust import AuthConfig, AuthConfigUpdate
from control.service import trust as service

__all__ = ("AuthConfigController",)

_ROTATE_DESCRIPTION = """Generates a new platform signing secret for the endpoint and returns it, once, as
`signing_secret` together with the endpoint record. The previous platform secret stops verifying at once.

**Warning:** there is no overlap: from the rotation on, every inbound request signed with the previous
platform secret fails verification (refused with a 401 under `hmac_enabled` and `on_failure: reject`).
Deliveries to destinations are not affected (a destination has its own secret). A platform-generated secret
only verifies requests signed with it (`test-webhook`, your own senders): a real provider signs with its own
secret, which it does not rotate with this one. To verify a provider, set the provider's own secret with
`PATCH /v1/endpoints/{id}/auth-config` (`secret`); while such a secret is set, rotation does not change
what the endpoint verifies with."""


class AuthConfigController(Controller):
    path = "/endpoints/{endpoint_id:str}/auth-config"
    tags = ("verification",)

    @get("/", operation_id="GetAuthConfig", responses=errors(401, 404, 410, 429))
    async def get_auth_config(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> AuthConfig:
        """How the endpoint verifies inbound requests. Never includes the secret: `secret_set` says whether
        one was set (otherwise the platform signing secret is used)."""
        return await service.get_auth_config(ctx, principal, endpoint_id)

    @patch("/", operation_id="UpdateAuthConfig", responses=errors(400, 401, 403, 404, 410, 429))
    async def update_auth_config(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[AuthConfigUpdate],
    ) -> AuthConfig:
        """Changes verification; fields left out stay. No algorithm is set by hand: with `provider` the
        scheme is that provider's; without (`null`), it is recognised per request from its headers (the
        standard provider signature headers, or `header_name`'s value). Applies on the edge within a second."""
        return await service.update_auth_config(ctx, principal, endpoint_id, data)

    @post(
        "/rotate-secret",
        operation_id="RotateSigningSecret",
        status_code=200,
        summary="Rotate the platform signing secret",
        description=_ROTATE_DESCRIPTION,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def rotate_secret(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> EndpointCreated:
        return await service.rotate_secret(ctx, principal, endpoint_id)
