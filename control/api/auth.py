"""Bearer authentication for /v1: the service's credential check (``control.service.accounts.admit``: the key,
then the key's rate limit) as Litestar middleware. /mcp has its own (``control.mcp.auth``) over the same check."""

from __future__ import annotations

from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult, DefineMiddleware

from control.service.accounts import admit

__all__ = ("bearer_auth",)


class _BearerAuthMiddleware(AbstractAuthenticationMiddleware):
    def __init__(self, app, *, allow_temporary: bool = False, **kwargs) -> None:
        super().__init__(app, **kwargs)
        self.allow_temporary = allow_temporary

    async def authenticate_request(self, connection: ASGIConnection) -> AuthenticationResult:
        state = connection.app.state
        principal = await admit(
            state.ctx,
            connection.headers.get("authorization"),
            allow_temporary=self.allow_temporary,
            charge=state.limiter.hit,
        )
        return AuthenticationResult(user=principal, auth=principal.key_id)


def bearer_auth(*, allow_temporary: bool = False) -> DefineMiddleware:
    """``allow_temporary`` admits ``hy_tmp_`` tokens (never on /v1)."""
    return DefineMiddleware(_BearerAuthMiddleware, allow_temporary=allow_temporary)
