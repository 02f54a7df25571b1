"""POST /api/start: a temporary endpoint, no account or key needed (docs/reference/agents.md)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import described
from control.api.public import OptionalBody, charge_address
from control.db.context import Context
from control.records.anonymous import StartRequest, TemporaryEndpoint
from control.service import anonymous as service
from control.service.accounts import TEMPORARY_LIFETIME

__all__ = ("StartController", "session_cookie")

_COOKIE_DOC = (
    "The browser session (HttpOnly, SameSite=Lax, Secure when this instance is served over https), valid as "
    "long as a temporary endpoint: sent back, the same endpoint is answered again (`reused: true`)"
)


def session_cookie(ctx: Context, value: str) -> Cookie:
    return Cookie(
        key=service.SESSION_COOKIE,
        value=value,
        max_age=int(TEMPORARY_LIFETIME.total_seconds()),
        path="/",
        httponly=True,
        samesite="lax",
        secure=ctx.settings.control_url.startswith("https://"),
    )


_EMPTY = StartRequest()
"""No body at all reads as ``{}``; a JSON ``null`` is refused like any other body that is not an object."""


class StartController(Controller):
    path = "/api"
    tags = ("provisioning",)

    @post(
        "/start",
        operation_id="StartTemporaryEndpoint",
        status_code=200,
        security=[{}, {"session": []}],
        operation_class=OptionalBody,
        response_cookies=[
            Cookie(
                key=service.SESSION_COOKIE,
                path="/",
                max_age=int(TEMPORARY_LIFETIME.total_seconds()),
                httponly=True,
                samesite="lax",
                documentation_only=True,
                description=_COOKIE_DOC,
            )
        ],
        responses=described(
            {
                400: "Invalid body: `validation_error` (the message names the field)",
                403: "`registration_closed`: this instance hands out no temporary endpoints",
                409: "`ref_taken`: this session registered an account that owns the endpoint of this `ref`",
                429: "`rate_limited`, with `Retry-After`: too many requests from this client address",
            }
        ),
    )
    async def start(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], data: JSONBody[StartRequest] = _EMPTY
    ) -> Response[TemporaryEndpoint]:
        """A temporary endpoint, expiring 3 days after it was made, for whoever calls: no key needed. Send
        events to `ingest_url`; a human follows `inbox_url`. `api_token` (`hy_tmp_`) works on `/mcp` and the
        inbox, never on `/v1`; each answer carries a new one, valid for 3 days.

        The answer sets the `hy_session` cookie: a call that sends it back gets the same endpoint again with
        `reused: true` (without it, every call makes a new endpoint). With `ref`, the session gets one
        endpoint per `ref`. `provider_hint` names the provider that will send (kept in the endpoint's name).
        `POST /api/register` with the `api_token` makes the endpoints permanent."""
        service.require_open(ctx)
        await charge_address(request, "start")
        started = await service.start(ctx, session=request.cookies.get(service.SESSION_COOKIE), data=data)
        return Response(started.endpoint, cookies=[session_cookie(ctx, started.session)])
