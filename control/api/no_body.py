"""A body sent to a /v1 operation that takes none is a 400 naming ``body``, as an unknown field or query
parameter is.

Litestar reads a body only for a handler that declares one, so what a caller sent to any other operation was
dropped unread: ``POST .../deliveries/retry`` with ``{"since": ..., "destination_id": ...}`` answered 202 and
retried every failed delivery of the endpoint (its filters are query parameters), ``not json at all`` to
``enable`` answered 200. An operation's options that a caller put in a body are therefore named with the
query string they belong in. Whitespace alone is no body (some clients send a newline). Runs as the /v1
router's ``before_request``, after authentication (an unauthenticated caller learns nothing of an
operation), before the handler, for every operation without a declared body.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from litestar import Litestar, Request

from control.api.query_names import parameter_names
from shared.errors import ValidationError

__all__ = ("refuse_unread_body",)

_NAMES: WeakKeyDictionary[Litestar, dict[tuple[str, str], frozenset[str]]] = WeakKeyDictionary()
"""Per app: (path template, method) -> the query parameters its operation reads (its routes never change)."""


async def refuse_unread_body(request: Request[Any, Any, Any]) -> None:
    if request.route_handler.parsed_data_field is not None:
        return
    body = await request.body()
    if not body.strip():
        return
    app = request.app
    names = _NAMES.get(app)
    if names is None:
        names = _NAMES[app] = parameter_names(app.routes)
    taken = sorted(names.get((request.scope.get("path_template", ""), request.method), ()))
    where = f"; its parameters go in the query string ({', '.join(taken)})" if taken else ""
    raise ValidationError(f"body: this operation takes no body{where}")
