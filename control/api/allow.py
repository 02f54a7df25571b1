"""``OPTIONS`` on any path answers ``204`` with an ``Allow`` header listing every method of that path.

Litestar answers OPTIONS itself, but its handler lists the methods of the route it was created for before
the controllers' handlers of the same path were merged into one route: ``OPTIONS /v1/endpoints/{id}`` said
``DELETE, OPTIONS`` although GET and PATCH are there too. This middleware answers from the merged routes.

OPTIONS needs no credentials (Litestar's authentication middleware skips it, and so does this answer): a
CORS preflight carries none, and the methods of a path are no secret, the OpenAPI document at ``/schema``
lists them for anyone. It is not rate limited either, for the same reason; it touches neither Postgres nor
Redis.
"""

from __future__ import annotations

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Receive, Scope, Send

__all__ = ("AllowMiddleware", "allowed_methods")


def allowed_methods(app: Litestar) -> dict[str, str]:
    """The ``Allow`` value of every route, by its ``path_format`` (``/v1/endpoints/{endpoint_id}``)."""
    merged: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            merged.setdefault(route.path_format or "/", set()).update(route.methods)
    return {path: ", ".join(sorted(methods | {"OPTIONS"})) for path, methods in merged.items()}


class AllowMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    def __init__(self) -> None:
        self._allow: dict[str, str] | None = None  # one app's routes, which never change once it serves

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        allow = None
        if scope["type"] == ScopeType.HTTP and scope["method"] == "OPTIONS":  # scopes: HTTP only
            if self._allow is None:
                self._allow = allowed_methods(scope["litestar_app"])
            allow = self._allow.get(scope.get("path_template", ""))
        if allow is None:
            await next_app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 204, "headers": [(b"allow", allow.encode())]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
