"""A path with an empty segment (``/v1/endpoints//auth-config``) is a 404 naming that path as sent.

Litestar's router collapses ``//`` before it matches, so ``PATCH /v1/endpoints//auth-config`` (a script whose
id variable came out empty) reached ``PATCH /v1/endpoints/{id}`` with the id ``auth-config`` and was refused
as ``provider: unknown field``: an answer about the wrong resource. No route of the API has an empty
segment, so such a path names nothing and says so: through the middleware when the collapsed path matched a
route, through the error handler (:func:`empty_segment`) when it matched none or not for that method. A
trailing slash is not an empty segment and keeps Litestar's handling.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.exceptions import NotFoundException
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

__all__ = ("EmptySegmentMiddleware", "empty_segment")


def empty_segment(scope: Scope) -> str | None:
    """The 404's message when the path as sent has an empty segment, else None."""
    path = (scope.get("raw_path") or scope["path"].encode()).split(b"?", 1)[0]
    if b"//" not in path:
        return None
    return f"no route for {scope.get('method', 'GET')} {path.decode('latin-1')[:200]} (a path segment is empty)"


class EmptySegmentMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        message = empty_segment(scope)
        if message is not None:
            raise NotFoundException(detail=message)
        await next_app(scope, receive, send)
