"""Bearer authentication for /mcp: the service's credential check (``control.service.callers.bearer_caller``:
the key, then the key's rate limit), as /v1 runs it, with temporary ``hy_tmp_`` tokens (``POST /api/start``)
admitted.

A missing or bad key is the 401 envelope before the SDK sees the request; the ``Principal`` goes into the
ASGI scope, where the tools' server finds it (``control.mcp.server``).
"""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult, DefineMiddleware

from control.service.callers import bearer_caller

__all__ = ("mcp_auth",)


class _McpAuthMiddleware(AbstractAuthenticationMiddleware):
    async def authenticate_request(self, connection: ASGIConnection[Any, Any, Any, Any]) -> AuthenticationResult:
        principal = await bearer_caller(
            connection.app.state.ctx, connection.headers.get("authorization"), allow_temporary=True
        )
        return AuthenticationResult(user=principal, auth=principal.key_id)


def mcp_auth() -> DefineMiddleware:
    return DefineMiddleware(_McpAuthMiddleware)
