"""A /v1 query parameter the operation does not take is a 400 naming it, as an unknown body field is.

Litestar reads the parameters a handler declares (its dependencies' too) and ignores the rest, so a typo
(``?sucess=false``) or a filter another operation has (``destination_id`` on a list that had none) answered
200 with everything unfiltered: the caller could not tell. Bodies already refuse unknown fields
(``forbid_unknown_fields``); a query string now does the same, with the names the operation takes. A name
given twice is refused too: no /v1 parameter takes a list, and ``?success=true&success=false`` answered 200
with an empty list.

The names come from the route's own parameter model (``KwargsModel.expected_query_params``: what Litestar
would read), built once per route and method. Authentication runs first (this middleware sits inside
``bearer_auth``), so an unauthenticated caller learns nothing of an operation's parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qsl
from weakref import WeakKeyDictionary

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Receive, Scope, Send

from shared.errors import ValidationError

__all__ = ("UnknownQueryMiddleware", "names_of")

_NAME_SHOWN = 100
"""Characters of an unknown name quoted back."""


_NAMES: WeakKeyDictionary[Litestar, dict[tuple[str, str], frozenset[str]]] = WeakKeyDictionary()
"""Per app, built at its first request with a query or a body (its routes never change)."""


def names_of(app: Litestar) -> dict[tuple[str, str], frozenset[str]]:
    """(path template, method) -> the query parameters its operation reads, for this middleware and for the
    refusal of an unread body (``control.api.no_body``), which names them."""
    names = _NAMES.get(app)
    if names is None:
        names = _NAMES[app] = _parameter_names(app.routes)
    return names


def _parameter_names(routes: Sequence[object]) -> dict[tuple[str, str], frozenset[str]]:
    """(path template, method) -> the query parameter names its handler reads."""
    names: dict[tuple[str, str], frozenset[str]] = {}
    for route in routes:
        if isinstance(route, HTTPRoute):
            for method, (_handler, model) in route.route_handler_map.items():
                names[(route.path_format or "/", method)] = frozenset(
                    p.field_alias for p in model.expected_query_params
                )
    return names


class UnknownQueryMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        query = scope.get("query_string", b"")
        if query and scope["type"] == ScopeType.HTTP:  # scopes: HTTP only
            taken = names_of(scope["litestar_app"]).get((scope.get("path_template", ""), scope["method"]))
            if taken is not None:
                given = [k for k, _ in parse_qsl(query.decode("utf-8", "replace"), keep_blank_values=True)]
                unknown = sorted(set(given) - taken)
                if unknown:
                    what = ", ".join(sorted(taken)) if taken else "none"
                    raise ValidationError(
                        f"{unknown[0][:_NAME_SHOWN]}: unknown query parameter (this operation takes: {what})"
                    )
                if len(given) != len(set(given)):  # no /v1 parameter is a list: which one would count?
                    twice = sorted(k for k in set(given) if given.count(k) > 1)[0]
                    raise ValidationError(f"{twice}: given more than once; each query parameter takes one value")
        await next_app(scope, receive, send)
