"""Bearer authentication for /v1 as Litestar middleware: the key is resolved, and its rate limit charged, by
``control.service.callers``, as for every authenticated surface (/mcp has its own middleware,
``control.mcp.auth``, over the same function)."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult, DefineMiddleware
from litestar.types import ASGIApp

from control.service.callers import bearer_caller

__all__ = ("bearer_auth",)


class _BearerAuthMiddleware(AbstractAuthenticationMiddleware):
    def __init__(self, app: ASGIApp, *, allow_temporary: bool = False, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.allow_temporary = allow_temporary

    async def authenticate_request(self, connection: ASGIConnection[Any, Any, Any, Any]) -> AuthenticationResult:
        ctx = connection.app.state.ctx
        principal = await bearer_caller(
            ctx, connection.headers.get("authorization"), allow_temporary=self.allow_temporary
        )
        return AuthenticationResult(user=principal, auth=principal.key_id)


def bearer_auth(*, allow_temporary: bool = False) -> DefineMiddleware:
    """``allow_temporary`` admits ``hy_tmp_`` tokens (never on /v1)."""
    return DefineMiddleware(_BearerAuthMiddleware, allow_temporary=allow_temporary)
