"""/mcp in the Litestar app: the SDK's Streamable HTTP transport behind our Bearer authentication.

- **Stateless.** Every POST carries its own call: no ``Mcp-Session-Id``, nothing kept between requests, so
  any number of control processes and granian workers serve /mcp behind a plain load balancer. The tools
  need nothing more: each is one request/response (the long poll included), and none asks the client
  anything back.
- **SSE for slow answers.** ``json_response=False``: an answer ready at once is sent as plain JSON, a slow
  one (``wait_for_event``) as an event stream with keep-alive pings, so proxies do not cut a long poll;
  a client that disconnects cancels its call.
- **Authentication** is the /v1 middleware with temporary tokens admitted (``hy_tmp_`` from
  ``POST /api/start``): a missing or bad key is our 401 envelope before the SDK sees the request, and every
  request is charged to the key's rate limit. Account scoping is the service layer's, as on /v1.
- **DNS-rebinding protection off.** The SDK turns it on for a server bound to localhost, checking ``Host``
  and ``Origin`` against a list. It defends unauthenticated local servers from web pages that rebind a
  name to 127.0.0.1; here every request needs a Bearer key such a page cannot know (browsers send no
  ``Authorization`` header of their own), and a server reached by its public URL would need that URL's
  host (and every proxy's, every custom domain's, every browser-based client's origin) listed to work at
  all. The key is the protection; a Host list would only break deployments.
- The session manager's ``run()`` (its task group) is entered by the app's lifespan, once per app: Litestar
  does not run a mounted app's own lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from litestar import Litestar, asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from control.auth import bearer_auth
from control.mcp.server import Catalog, catalog, create_server

__all__ = ("McpMount",)


class McpMount:
    """One app's MCP server: its route handler and its lifespan (a session manager runs once)."""

    def __init__(self) -> None:
        self.catalog: Catalog = catalog()
        self.manager = StreamableHTTPSessionManager(
            app=create_server(self.catalog),
            stateless=True,
            json_response=False,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        transport = StreamableHTTPASGIApp(self.manager)

        @asgi("/mcp", is_mount=True, copy_scope=True, middleware=[bearer_auth(allow_temporary=True)])
        async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
            await transport(scope, receive, send)  # type: ignore[arg-type]

        self.handler: ASGIRouteHandler = mcp

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        """Builds the tool catalog from the app's OpenAPI document and runs the session manager."""
        self.catalog.bind(app.openapi_schema.to_schema())
        app.state.mcp = self.catalog
        async with self.manager.run():
            yield
