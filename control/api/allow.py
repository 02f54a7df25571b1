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

from functools import cache

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Receive, Scope, Send

__all__ = ("AllowMiddleware", "allowed_methods")


@cache
def _methods_by_path(app: Litestar) -> dict[str, str]:
    merged: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            merged.setdefault(route.path_format or "/", set()).update(route.methods)
    return {path: ", ".join(sorted(methods | {"OPTIONS"})) for path, methods in merged.items()}


def allowed_methods(app: Litestar, path_template: str) -> str | None:
    """The ``Allow`` value of a route (its ``path_format``, e.g. ``/v1/endpoints/{endpoint_id}``)."""
    return _methods_by_path(app).get(path_template)


class AllowMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        allow = None
        if scope["method"] == "OPTIONS":
            allow = allowed_methods(scope["litestar_app"], scope.get("path_template", ""))
        if allow is None:
            await next_app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 204, "headers": [(b"allow", allow.encode())]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
