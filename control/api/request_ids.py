"""Every control response carries ``x-request-id``, and every line logged while it is handled carries the
same id (``shared.logs``): a support request quoting the header finds the lines in a JSON log at once.

A caller's own ``x-request-id`` (a load balancer's, a tracing proxy's) is kept when it is a short token of
safe characters, so one id follows the request through the hops; anything else is replaced by a fresh one,
never echoed (it would be a way to write into the logs). The middleware sets the id for the handler's log
lines; the header is added by a ``before_send`` hook, which Litestar runs outside everything else, so the
answers of its exception handlers (401, 404, 405, ...) carry the id too. At debug level each request also
gets one line (method, path without its query, status).
"""

from __future__ import annotations

import logging
import re
import uuid

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from shared.logs import log_context

__all__ = ("RequestIdMiddleware", "add_request_id", "request_id")

_ACCEPTED = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_KEY = "hookyard.request_id"

log = logging.getLogger("hookyard.control.requests")


def request_id(scope: Scope) -> str:
    """The request's id: the caller's when acceptable, else a fresh one; the same for the whole request."""
    found = scope.get(_KEY)
    if isinstance(found, str):
        return found
    given = next((v for k, v in scope.get("headers", ()) if k == b"x-request-id"), None)
    made = given.decode() if given and _ACCEPTED.fullmatch(given) else "req_" + uuid.uuid4().hex
    scope[_KEY] = made  # type: ignore[literal-required]  # hookyard's own key in the ASGI scope
    return made


class RequestIdMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        with log_context(request_id=request_id(scope)):
            await next_app(scope, receive, send)


async def add_request_id(message: Message, scope: Scope) -> None:
    """``before_send``: the id on every HTTP response, and its debug line."""
    if message["type"] == "http.response.start" and scope["type"] == ScopeType.HTTP:
        given = request_id(scope)
        message["headers"] = [*message.get("headers", ()), (b"x-request-id", given.encode())]
        if log.isEnabledFor(logging.DEBUG):
            with log_context(request_id=given):
                log.debug("%s %s %d", scope["method"], scope["path"], message["status"])
