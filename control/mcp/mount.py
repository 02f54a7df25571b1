"""/mcp in the Litestar app: the SDK's Streamable HTTP transport behind our Bearer authentication.

- **Stateless.** Every POST carries its own call: no ``Mcp-Session-Id``, nothing kept between requests, so
  any number of control processes and granian workers serve /mcp behind a plain load balancer. The tools
  need nothing more: each is one request/response (the long poll included), and none asks the client
  anything back.
- **SSE for slow answers.** ``json_response=False``: an answer ready at once is sent as plain JSON, a slow
  one (``wait_for_event``) as an event stream with keep-alive pings, so proxies do not cut a long poll;
  a client that disconnects cancels its call.
- **Authentication** is the /v1 credential check with temporary tokens admitted (``hy_tmp_`` from
  ``POST /api/start``; ``control.mcp.auth``): a missing or bad key is our 401 envelope before the SDK sees
  the request, and every request is charged to the key's rate limit. Account scoping is the service layer's, as on /v1.
- **DNS-rebinding protection off.** The SDK turns it on for a server bound to localhost, checking ``Host``
  and ``Origin`` against a list. It defends unauthenticated local servers from web pages that rebind a
  name to 127.0.0.1; here every request needs a Bearer key such a page cannot know (browsers send no
  ``Authorization`` header of their own), and a server reached by its public URL would need that URL's
  host (and every proxy's, every custom domain's, every browser-based client's origin) listed to work at
  all. The key is the protection; a Host list would only break deployments.
- **The /v1 body limit.** A request larger than the app's ``request_max_body_size`` (what /v1 refuses) is the
  413 ``payload_too_large`` envelope before the SDK reads it, so a tool takes no larger argument (a replay's
  ``body``) than its /v1 route; the SDK's own limit (4 MiB, a plain-text 413) is set to the same and never
  reached first.
- **POST only.** Stateless, there is no session to end (DELETE) and nothing the server would ever send on a
  standalone stream (GET), which the SDK would otherwise hold open forever; both are 405 with
  ``Allow: OPTIONS, POST``, as the MCP specification allows, and OPTIONS answers 204 like every route.
- **No line per request.** Stateless, the SDK makes a transport for each POST and ends it after the answer,
  logging ``Terminating session: None`` at INFO each time (logger ``mcp.server.streamable_http``, whose only
  INFO line it is; the SDK has no option for it): that logger is set to WARNING, so its warnings and errors
  still show.
- **Started by the first call, not at start.** The SDK (about 0.7 s of CPU to import) and its session
  manager start with the first POST to /mcp in a lifespan, in a task of their own that holds the manager's
  ``run()`` (its task group must be entered and left by one task) until the lifespan ends; requests
  arriving meanwhile wait for it. A control process that never serves /mcp never pays for it. Litestar does
  not run a mounted app's own lifespan, and the SDK runs a manager once, so each lifespan makes its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Litestar, asgi
from litestar.enums import ScopeType
from litestar.handlers import ASGIRouteHandler
from litestar.types import HTTPScope, Receive, Scope, Send

from control.mcp.auth import mcp_auth
from control.mcp.catalog import Catalog, catalog
from shared.errors import body_too_large, envelope

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

__all__ = ("McpMount",)

_ALLOW = (b"allow", b"OPTIONS, POST")
_TRANSPORT_LOGGER = "mcp.server.streamable_http"
_SDK_LIMIT = 4 * 1024 * 1024
"""The SDK's default request limit, used only before a lifespan gave the app's."""


async def _answer(
    send: Send, status: int, code: str, message: str, *extra: tuple[bytes, bytes], head: bool = False
) -> None:
    """The error envelope, as /v1 answers it (a HEAD request gets its headers only)."""
    body = msgspec.json.encode(envelope(code, message))
    headers = [*extra, (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body, "more_body": False})


async def _within(scope: HTTPScope, receive: Receive, send: Send, limit: int) -> Receive | None:
    """A ``receive`` replaying the whole body when it is at most ``limit`` bytes; else None, once the 413 is
    sent (or the client left). A declared ``content-length`` over it is refused before anything is read."""
    too_large = body_too_large(limit)
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            await _answer(send, 413, "payload_too_large", too_large)
            return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: nothing to answer
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            await _answer(send, 413, "payload_too_large", too_large)
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    whole: Any = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

    async def replay() -> Any:
        nonlocal whole
        if whole is None:
            return await receive()  # the SDK waits here for a disconnect while it answers
        message, whole = whole, None
        return message

    return replay


async def _not_post(scope: HTTPScope, send: Send) -> None:
    """204 for OPTIONS, else 405 with the error envelope."""
    method = scope["method"]
    if method == "OPTIONS":
        await send({"type": "http.response.start", "status": 204, "headers": [_ALLOW]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    message = f"method {method} is not allowed on /mcp: send MCP messages with POST (stateless Streamable HTTP)"
    await _answer(send, 405, "method_not_allowed", message, _ALLOW, head=method == "HEAD")


class McpMount:
    """One app's MCP server: its route handler and its lifespan. The SDK's session manager runs only once, so
    each lifespan makes its own (an app may live through several: ``control.app.bind``); the tool catalog,
    built from the app's OpenAPI document, is the app's."""

    def __init__(self) -> None:
        logging.getLogger(_TRANSPORT_LOGGER).setLevel(logging.WARNING)  # see the module docstring
        self.catalog: Catalog = catalog()
        self.transport: StreamableHTTPASGIApp | None = None  # the running lifespan's, once started
        self._stop: asyncio.Event | None = None  # set while a lifespan runs
        self._started: asyncio.Future[StreamableHTTPASGIApp] | None = None
        self._serving: asyncio.Task[None] | None = None
        self._limit = _SDK_LIMIT  # the app's request_max_body_size, once a lifespan gave it

        @asgi("/mcp", is_mount=True, copy_scope=True, middleware=[mcp_auth()])
        async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:  # an HTTP mount: Litestar routes only HTTP requests here
                raise TypeError(f"/mcp serves HTTP, not {scope['type']}")
            if scope["method"] != "POST":
                await _not_post(scope, send)
                return
            within = await _within(scope, receive, send, self._limit)
            if within is None:
                return
            transport = self.transport or await self._start()
            await transport(scope, within, send)  # type: ignore[arg-type]  # Litestar's Scope is the SDK's ASGI scope

        self.handler: ASGIRouteHandler = mcp

    async def _start(self) -> StreamableHTTPASGIApp:
        """The running transport, started by the first caller of this lifespan (the others wait for it)."""
        if self._stop is None:  # as the SDK's own manager answers a request before its run()
            raise RuntimeError("/mcp is served only while the app's lifespan runs")
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._serving = asyncio.create_task(self._serve(self._started, self._stop))
        return await asyncio.shield(self._started)

    async def _serve(self, started: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """Holds a session manager's ``run()`` from the first call until the lifespan ends."""
        try:
            from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
            from mcp.server.transport_security import TransportSecuritySettings

            from control.mcp.server import create_server

            manager = StreamableHTTPSessionManager(
                app=create_server(self.catalog),
                stateless=True,
                json_response=False,
                max_request_body_size=self._limit,
                security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            async with manager.run():
                self.transport = StreamableHTTPASGIApp(manager)
                started.set_result(self.transport)
                await stop.wait()
        except BaseException as exc:
            if not started.done():  # the waiting callers get the failure; the next call tries again
                started.set_exception(exc)
                started.exception()  # retrieved: the callers have it, so asyncio does not report it again
                self._started = None
            raise
        finally:
            self.transport = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        """Gives the tool catalog the app's OpenAPI document (read on first use); /mcp starts on its first call."""
        self.catalog.attach(lambda: app.openapi_schema.to_schema())
        limit = app.request_max_body_size  # None when unlimited; control.app always sets one
        self._limit = limit if isinstance(limit, int) else _SDK_LIMIT
        app.state.mcp = self.catalog
        self._stop, self._started, self._serving = asyncio.Event(), None, None
        try:
            yield
        finally:
            stop, serving = self._stop, self._serving
            self._stop = self._started = self._serving = None
            stop.set()
            if serving is not None:
                await asyncio.gather(serving, return_exceptions=True)
