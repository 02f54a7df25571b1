"""GET /inbox/{endpoint_id}: where `inbox_url` leads, the live inbox page of one endpoint.

The page is a shell: the endpoint's id, name, ingest URL and expiry, escaped here, and the package's
assets (``/static/inbox.js`` with ``curl.js`` and ``hexdump.js``, ``/static/inbox.css``) that draw the events
from the page's data routes (``control.api.inbox.data``). Nothing is loaded from elsewhere, and the
Content-Security-Policy says so: scripts, styles and connections from this origin only, no
``unsafe-inline``, no framing, no form posts.

``?link=`` carries a signed inbox link (``control.service.inbox_links``): it is traded for a cookie scoped
to this page's path and answered with a 303 to the same URL without it, so the token leaves the address
bar and the history before anything renders. A forged, expired or rotated link is 401: a browser reads why
and how to get a link that works (``control.api.inbox.refusal``), any other client the error envelope.
"""

from __future__ import annotations

import html
import json
from typing import Annotated, Any

from litestar import Controller, MediaType, Request, Response, get
from litestar.datastructures import Cookie
from litestar.di import NamedDependency

from control.api.errors import status_of
from control.api.inbox.refusal import REFUSED_STATUSES, refusal, wants_html
from control.api.openapi import described
from control.api.params import EndpointId, query, text_schema
from control.db.context import Context
from control.records.endpoints import Endpoint
from control.service.anonymous import SESSION_COOKIE
from control.service.callers import redeemed_link
from control.service.inbox.page import inbox_endpoint
from control.service.inbox_links import LINK_COOKIE, MAX_LINK
from shared.errors import ServiceError
from shared.providers.catalog import CATALOG
from shared.signatures import CATALOG_SIGNATURE_HEADERS
from shared.signatures.schemes import HEADERS as SCHEME_HEADERS
from shared.signatures.schemes import SIGNATURE_HEADERS

__all__ = ("HEADERS", "InboxController", "render")

HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
"""The page carries the ingest URL, a secret: never cached, never framed, never sent on as a Referer."""


_PROVIDERS = json.dumps(
    [name for name, p in CATALOG.items() if p.kind is not None]
    + sorted(name for name, p in CATALOG.items() if p.kind is None)
)
"""The provider filter's choices: the four kinds first, then every catalog name (what ``provider=`` takes)."""

_SIGNATURE_HEADERS = json.dumps(
    {
        "order": [
            [name.decode(), *found[:2]] for name, found in sorted(SIGNATURE_HEADERS.items(), key=lambda i: i[1][2])
        ],
        "names": {
            scheme: {family: names[0] for family, names in families.items()}
            for scheme, families in SCHEME_HEADERS.items()
        },
        "catalog": CATALOG_SIGNATURE_HEADERS,
    },
    separators=(",", ":"),
)
"""The provider signature headers in the order the server detects them, each scheme's per family, and the
header of each catalog provider re-signed as it signs (Slack's...): the page
shows which header a re-signed replay uses by default (``shared.signatures.provider_signature_header``)."""


def render(endpoint: Endpoint) -> str:
    # Temporariness is said once, by the expiry: a "Temporary endpoint" label beside the id repeated the
    # name /api/start gives its endpoint ("Inbox Temporary endpoint | Temporary endpoint").
    expires = endpoint.expires_at.strftime("%Y-%m-%d %H:%M UTC") if endpoint.expires_at else "never (permanent)"
    if endpoint.temporary:
        expires += " (temporary)"
    e = html.escape
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex">'
        '<title>hookyard inbox</title><link rel="icon" href="/favicon.ico">'
        '<link rel="stylesheet" href="/static/inbox.css">'
        '<script src="/static/curl.js" defer></script><script src="/static/hexdump.js" defer></script>'
        '<script src="/static/pretty.js" defer></script><script src="/static/resign.js" defer></script>'
        '<script src="/static/inbox.js" defer></script>'
        '<link rel="stylesheet" href="/static/transform.css"><script src="/static/transform.js" defer></script>'
        '<script src="/static/alerts.js" defer></script><script src="/static/destinations.js" defer></script></head>'
        f'<body data-endpoint="{e(endpoint.id)}" data-ingest="{e(endpoint.ingest_url)}"'
        f' data-temporary="{str(endpoint.temporary).lower()}" data-signature-headers="{e(_SIGNATURE_HEADERS)}"'
        f' data-providers="{e(_PROVIDERS)}">'
        f'<header><h1>Inbox <span class="name">{e(endpoint.name)}</span></h1>'
        f'<dl class="meta"><dt>Endpoint id</dt><dd><code>{e(endpoint.id)}</code></dd>'
        f'<dt>Ingest URL</dt><dd id="ingest"><code id="ingest-url">{e(endpoint.ingest_url)}</code></dd>'
        f"<dt>Expires</dt><dd>{e(expires)}</dd></dl>"
        '<p id="status" role="status">connecting…</p></header>'
        "<noscript><p>This page needs JavaScript to list events; the same data is at <code>/v1</code> and "
        "<code>/mcp</code>.</p></noscript><main></main></body></html>"
    )


class InboxController(Controller):
    path = "/inbox"
    tags = ("provisioning",)

    @get(
        "/{endpoint_id:str}",
        operation_id="OpenInbox",
        media_type=MediaType.HTML,
        security=[{"bearer": []}, {"session": []}, {"inboxLink": []}],
        responses=described(
            {
                303: "A valid `link` was traded for the `hy_inbox` cookie: the page again, without `link`",
                400: "Invalid request: `validation_error`",
                401: "`unauthorized`: no session cookie, link cookie, key or token; or a forged, expired or "
                "rotated `link`",
                404: "`not_found`: unknown endpoint, or one of another account",
                410: "`endpoint_expired`: a temporary endpoint past its `expires_at`",
            }
        ),
    )
    async def inbox(
        self,
        ctx: NamedDependency[Context],
        request: Request[Any, Any, Any],
        endpoint_id: EndpointId,
        link: Annotated[
            str | None,
            query(
                "A signed inbox link's token (`POST /v1/endpoints/{id}/inbox-link`); traded for a cookie and "
                "removed from the URL by a 303",
                **text_schema(MAX_LINK),
            ),
        ] = None,
    ) -> Response[str]:
        """The endpoint's live inbox page (HTML), for its owner: a signed inbox link (the `inbox_url` of
        `/api/start`, or one from `CreateInboxLink`; then its `hy_inbox` cookie), the browser that called
        `/api/start` (its `hy_session` cookie), or `Authorization: Bearer` with the `api_token` or an API key
        of the account. Refused, a browser (`Accept: text/html`) gets an HTML page that says how to get a
        link, with the same status; other clients the error envelope."""
        try:
            return await self._page(ctx, request, endpoint_id, link)
        except ServiceError as exc:
            if status_of(exc) not in REFUSED_STATUSES or not wants_html(request):
                raise
            return refusal(ctx, endpoint_id, exc, HEADERS)

    async def _page(
        self, ctx: Context, request: Request[Any, Any, Any], endpoint_id: str, link: str | None
    ) -> Response[str]:
        if link is not None:
            redeemed = await redeemed_link(ctx, endpoint_id, link)
            cookie = Cookie(
                key=LINK_COOKIE,
                value=redeemed.cookie,
                max_age=redeemed.max_age_s,
                path=f"/inbox/{endpoint_id}",
                httponly=True,
                samesite="lax",
                secure=ctx.settings.control_url.startswith("https://"),
            )
            headers = {**HEADERS, "location": f"/inbox/{endpoint_id}"}
            return Response("", status_code=303, media_type=MediaType.HTML, headers=headers, cookies=[cookie])
        endpoint = await inbox_endpoint(
            ctx,
            endpoint_id,
            authorization=request.headers.get("authorization"),
            session=request.cookies.get(SESSION_COOKIE),
            link=request.cookies.get(LINK_COOKIE),
        )
        return Response(render(endpoint), media_type=MediaType.HTML, headers=HEADERS)
