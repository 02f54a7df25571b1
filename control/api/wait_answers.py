"""The long poll's answer outside Litestar: a waiter parked by ``events/wait`` is answered by raw ASGI.

A thousand waiters woken by one event are answered back to back on one event loop, and each answer that
returned through Litestar's request path (the handler's return, its response, the dependency cleanup, the
route's five middlewares unwinding, the exception middleware's send wrapper) cost about 60 µs: the bulk of
the wake-up's p99 (ADR 0068). So the route runs in Litestar only up to the wait: authentication, rate limit,
the query parameters (unknown ones refused), the timeout's range and the endpoint's checks all answer as
before, errors in the envelope. The handler then leaves the checked wait (``service.PendingWait``) in the
scope and answers nothing; ``WaitAnswers``, around Litestar's handler as Starlette's ``TrustedHostMiddleware``
wraps an app, awaits it and sends the answer: the 200 as the bytes encoded once for every waiter the same
read answered, a 204 and any error through Litestar's own response classes and the app's exception handlers.
The send it is given is Litestar's, so ``before_send`` (``x-request-id``) runs on every answer as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import msgspec
from litestar import Request, Response
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from control.api.errors import EXCEPTION_HANDLERS
from control.api.request_ids import request_id
from control.records.events import Event, EventWait
from control.service.events.read import PendingWait
from shared.logs import log_context

__all__ = ("WaitAnswers", "park", "unless_disconnected")

T = TypeVar("T")

_SLOT = "hookyard.wait"
"""The scope key a parked wait is left under (set to None by ``WaitAnswers`` for every HTTP request)."""


def park(scope: Scope, pending: PendingWait) -> bool:
    """Leaves ``pending`` for ``WaitAnswers`` to answer; False when nothing is there to answer it (an app not
    wrapped), and the handler must wait itself."""
    if _SLOT not in scope:
        return False
    scope[_SLOT] = pending  # type: ignore[literal-required]  # hookyard's own key in the ASGI scope
    return True


class WaitAnswers:
    """Raw ASGI around Litestar's handler: answers the wait a request parked, once Litestar is done with it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        scope[_SLOT] = None  # type: ignore[literal-required]  # hookyard's own key in the ASGI scope
        await self.app(scope, receive, send)
        pending: PendingWait | None = scope.get(_SLOT)  # type: ignore[assignment]  # only park() sets it
        if pending is not None:
            await _answer(pending, scope, receive, send)


async def _answer(pending: PendingWait, scope: Scope, receive: Receive, send: Send) -> None:
    try:
        event = await unless_disconnected(receive, pending.result())
    except Exception as exc:  # noqa: BLE001 - answered as Litestar answers it: the app's exception handlers
        await _error(exc, scope, receive, send)
        return
    if event is None:  # time is up, or the client left (a 204 nobody reads)
        await Response(content=None, status_code=204).to_asgi_response(None, Request(scope, receive, send))(
            scope, receive, send
        )
        return
    body = _wait_body(event)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _error(exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
    """The error envelope of a failure during the wait (a database away during a look: 503), by the handler
    Litestar would have picked: the first of the exception's classes in ``EXCEPTION_HANDLERS``."""
    handler = next(EXCEPTION_HANDLERS[kind] for kind in type(exc).__mro__ if kind in EXCEPTION_HANDLERS)
    request: Request[Any, Any, Any] = Request(scope, receive, send)
    with log_context(request_id=request_id(scope)):
        response = handler(request, exc)
    await response.to_asgi_response(None, request)(scope, receive, send)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (after the request body, ASGI receive blocks until then)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(receive: Receive, work: Coroutine[Any, Any, T]) -> T | None:
    """Runs ``work`` but cancels it as soon as the client disconnects, so an abandoned long poll frees
    its waiter at once instead of at its deadline. None when the client left.

    ``work`` runs in the request's own task, which the watcher cancels (and the handler uncancels, as
    ``asyncio.timeout`` does) only when the client leaves: a second task per call plus two
    ``asyncio.wait`` rounds on the way out doubled the loop steps of every woken waiter."""
    task = asyncio.current_task()
    if task is None:  # not under an asyncio task: nothing to cancel, so no early exit
        return await work
    running, gone = True, False

    def leave(watcher: asyncio.Future[None]) -> None:
        nonlocal gone
        if watcher.cancelled():
            return
        watcher.exception()  # retrieved: a failing receive also means the client is gone
        if running:
            gone = True
            task.cancel()

    watcher = asyncio.ensure_future(_disconnected(receive))
    watcher.add_done_callback(leave)
    try:
        return await work
    except asyncio.CancelledError:
        if gone and task.uncancel() == 0:
            return None
        raise
    finally:
        running = False
        watcher.cancel()


_encoded: tuple[Event, bytes] | None = None


def _wait_body(event: Event) -> bytes:
    """The 200 body, encoded once per answer: the waiters one query answered get the very same ``Event``
    object (see ``service.wait_for_event``) and are answered back to back, so the last body encoded is
    remembered by the identity of its event (held here, so the identity cannot be reused)."""
    global _encoded
    last = _encoded
    if last is not None and last[0] is event:
        return last[1]
    body = msgspec.json.encode(EventWait(event=event))
    _encoded = (event, body)
    return body
