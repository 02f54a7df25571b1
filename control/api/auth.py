"""Bearer authentication for /v1 (and /mcp): resolves the key, then charges the key's rate limit."""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult, DefineMiddleware

from control.service.accounts import authenticate

__all__ = ("bearer_auth",)


class _BearerAuthMiddleware(AbstractAuthenticationMiddleware):
    def __init__(self, app, *, allow_temporary: bool = False, **kwargs) -> None:
        super().__init__(app, **kwargs)
        self.allow_temporary = allow_temporary

    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:
        state = connection.app.state
        principal = await authenticate(
            state.ctx, connection.headers.get("authorization"), allow_temporary=self.allow_temporary
        )
        await state.limiter.hit(state.ctx.keys.rate_limit(principal.key_id))
        return AuthenticationResult(user=principal, auth=principal.key_id)


def bearer_auth(*, allow_temporary: bool = False) -> DefineMiddleware:
    """``allow_temporary`` admits ``hy_tmp_`` tokens (the MCP server and the inbox; never /v1)."""
    return DefineMiddleware(_BearerAuthMiddleware, allow_temporary=allow_temporary)
