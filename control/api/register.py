"""POST /api/register: a free account and its API key; with `api_token`, the temporary endpoints become
permanent (docs/reference/agents.md: a temporary endpoint becomes permanent on registering)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import described
from control.api.public import charge_address
from control.db.context import Context
from control.records.anonymous import Registered, RegisterRequest
from control.service import registration as service
from control.service.anonymous import require_open

__all__ = ("RegisterController",)


class RegisterController(Controller):
    path = "/api"
    tags = ("provisioning",)

    @post(
        "/register",
        operation_id="Register",
        status_code=201,
        responses=described(
            {
                400: "Invalid body: `validation_error` (the message names the field)",
                401: "`unauthorized`: `api_token` is unknown, revoked or expired",
                403: "`registration_closed`: this instance does not register accounts",
                409: "`email_taken`: the address is registered already (any letter case); `already_registered`: "
                "the token's account registered already",
                429: "`rate_limited`, with `Retry-After`: too many requests from this client address",
            }
        ),
    )
    async def register(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], data: JSONBody[RegisterRequest]
    ) -> Registered:
        """Creates a free permanent account and answers its `hy_live_` API key, shown this once.

        With `api_token` (from `/api/start`), that token's account becomes this account: every endpoint of it
        that has not expired becomes permanent at once (`temporary: false`, `expires_at: null`, also at the
        ingest edge before this answer), keeping its events, deliveries and settings; they are listed in
        `endpoints`. The temporary tokens keep their /mcp access until their own 3 days end."""
        require_open(ctx)
        await charge_address(request, "register")
        return await service.register(ctx, data)
