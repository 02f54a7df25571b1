"""GET /inbox/{endpoint_id}: where `inbox_url` leads. A placeholder until the live inbox page is built.

It shows only what the owner already has (the endpoint's id, name, ingest URL and expiry), nothing from
captured events, every value escaped. The page loads nothing (no script, no external asset) and its
Content-Security-Policy allows nothing but its own inline style, by hash: no ``unsafe-inline``.
"""

from __future__ import annotations

import base64
import hashlib
import html
from typing import Any, ClassVar

from litestar import Controller, MediaType, Request, Response, get
from litestar.di import NamedDependency

from control.api.params import EndpointId
from control.api.public import described
from control.records.endpoints import Endpoint
from control.service import Context
from control.service.anonymous import SESSION_COOKIE
from control.service.inbox import inbox_endpoint

__all__ = ("InboxController", "render")

_STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}"
    "main{max-width:44rem;margin:3rem auto;padding:0 1.25rem}"
    "dt{font-weight:600;margin-top:.75rem}dd{margin:0;overflow-wrap:anywhere}"
    "code{font:14px ui-monospace,monospace}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
HEADERS = {
    "content-security-policy": (
        f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src 'none'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
"""The page carries the ingest URL, a secret: never cached, never framed, never sent on as a Referer."""


def render(endpoint: Endpoint) -> str:
    expires = endpoint.expires_at.strftime("%Y-%m-%d %H:%M UTC") if endpoint.expires_at else "never (permanent)"
    rows = (
        ("Endpoint", f"<code>{html.escape(endpoint.id)}</code>"),
        ("Name", html.escape(endpoint.name)),
        ("Ingest URL", f"<code>{html.escape(endpoint.ingest_url)}</code>"),
        ("Expires", html.escape(expires)),
    )
    items = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex">'
        f"<title>hookyard inbox</title><style>{_STYLE}</style></head><body><main>"
        "<h1>Inbox</h1><p>Requests sent to the ingest URL are captured. This page will show them live; until "
        "then, read them over the MCP server (<code>/mcp</code>) with your <code>api_token</code>, or over "
        "<code>/v1</code> with an API key.</p>"
        f"<dl>{items}</dl></main></body></html>"
    )


class InboxController(Controller):
    path = "/inbox"
    tags: ClassVar[list[str]] = ["provisioning"]

    @get(
        "/{endpoint_id:str}",
        operation_id="OpenInbox",
        media_type=MediaType.HTML,
        security=[{"bearer": []}, {"session": []}],
        responses=described(
            {
                400: "Invalid request: `validation_error`",
                401: "`unauthorized`: neither the /api/start session cookie nor a usable key or token",
                404: "`not_found`: unknown endpoint, or one of another account",
            }
        ),
    )
    async def inbox(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId
    ) -> Response[str]:
        """The endpoint's inbox page (HTML), for its owner: the browser that called `/api/start` (its
        `hy_session` cookie), or `Authorization: Bearer` with the `api_token` or an API key of the account."""
        endpoint = await inbox_endpoint(
            ctx,
            endpoint_id,
            authorization=request.headers.get("authorization"),
            session=request.cookies.get(SESSION_COOKIE),
        )
        return Response(render(endpoint), media_type=MediaType.HTML, headers=HEADERS)
