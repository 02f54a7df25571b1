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

from litestar import Request

from control.api.query_names import names_of
from shared.errors import ValidationError

__all__ = ("refuse_unread_body",)


async def refuse_unread_body(request: Request[Any, Any, Any]) -> None:
    if request.route_handler.parsed_data_field is not None:
        return
    body = await request.body()
    if not body.strip():
        return
    taken = sorted(names_of(request.app).get((request.scope.get("path_template", ""), request.method), ()))
    where = f"; its parameters go in the query string ({', '.join(taken)})" if taken else ""
    raise ValidationError(f"body: this operation takes no body{where}")
