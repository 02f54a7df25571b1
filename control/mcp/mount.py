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
- **POST only.** Stateless, there is no session to end (DELETE) and nothing the server would ever send on a
  standalone stream (GET), which the SDK would otherwise hold open forever; both are 405 with
  ``Allow: OPTIONS, POST``, as the MCP specification allows, and OPTIONS answers 204 like every route.
- **No line per request.** Stateless, the SDK makes a transport for each POST and ends it after the answer,
  logging ``Terminating session: None`` at INFO each time (logger ``mcp.server.streamable_http``, whose only
  INFO line it is; the SDK has no option for it): that logger is set to WARNING, so its warnings and errors
  still show.
- The session manager's ``run()`` (its task group) is entered by the app's lifespan (Litestar does not run a
  mounted app's own lifespan); the SDK runs a manager once, so each lifespan makes its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import msgspec
from litestar import Litestar, asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from control.mcp.auth import mcp_auth
from control.mcp.server import Catalog, catalog, create_server
from shared.errors import envelope

__all__ = ("McpMount",)

_ALLOW = (b"allow", b"OPTIONS, POST")
_TRANSPORT_LOGGER = "mcp.server.streamable_http"


async def _not_post(scope: Scope, send: Send) -> None:
    """204 for OPTIONS, else 405 with the error envelope."""
    method = scope["method"]
    if method == "OPTIONS":
        await send({"type": "http.response.start", "status": 204, "headers": [_ALLOW]})
        await send({"type": "http.response.body", "body": b""})
        return
    message = f"method {method} is not allowed on /mcp: send MCP messages with POST (stateless Streamable HTTP)"
    body = msgspec.json.encode(envelope("method_not_allowed", message))
    headers = [_ALLOW, (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 405, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


class McpMount:
    """One app's MCP server: its route handler and its lifespan. The SDK's session manager runs only once, so
    each lifespan makes its own (an app may live through several: ``control.app.bind``); the tool catalog,
    built from the app's OpenAPI document, is the app's."""

    def __init__(self) -> None:
        logging.getLogger(_TRANSPORT_LOGGER).setLevel(logging.WARNING)  # see the module docstring
        self.catalog: Catalog = catalog()
        self.transport: StreamableHTTPASGIApp | None = None  # the running lifespan's

        @asgi("/mcp", is_mount=True, copy_scope=True, middleware=[mcp_auth()])
        async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["method"] != "POST":
                await _not_post(scope, send)
                return
            if self.transport is None:  # as the SDK's own manager answers a request before its run()
                raise RuntimeError("/mcp is served only while the app's lifespan runs")
            await self.transport(scope, receive, send)  # type: ignore[arg-type]

        self.handler: ASGIRouteHandler = mcp

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        """Gives the tool catalog the app's OpenAPI document (read on first use) and runs a session manager."""
        self.catalog.attach(lambda: app.openapi_schema.to_schema())
        app.state.mcp = self.catalog
        manager = StreamableHTTPSessionManager(
            app=create_server(self.catalog),
            stateless=True,
            json_response=False,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        async with manager.run():
            self.transport = StreamableHTTPASGIApp(manager)
            try:
                yield
            finally:
                self.transport = None
