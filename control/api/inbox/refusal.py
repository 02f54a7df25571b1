"""What a browser reads when ``GET /inbox/{id}`` refuses it: why, and how to get a link that opens the page.

The person at that browser followed an address someone gave them (an agent's ``inbox_url``, a link from
``hookyard open``); a JSON envelope tells them nothing they can act on. So a request that prefers HTML (a
browser's navigation: ``Accept: text/html,...``) gets this page with the same status and the error's
message; every other client (``*/*``, ``application/json``) keeps the envelope, as on every route. The page
is static text under the inbox page's CSP: the only thing taken from the request is the endpoint id, shown
only when it has the shape of one, and escaped.
"""

from __future__ import annotations

import html
from typing import Any

from litestar import MediaType, Request, Response

from control.api.errors import status_of
from control.db.context import Context
from shared import ids
from shared.errors import ServiceError

__all__ = ("REFUSED_STATUSES", "refusal", "wants_html")

REFUSED_STATUSES = frozenset({400, 401, 403, 404})
"""What a person can do something about; a 429 keeps its envelope and Retry-After."""


def wants_html(request: Request[Any, Any, Any]) -> bool:
    """True when the client ranks HTML above JSON (a browser opening a page); ``*/*`` stays JSON."""
    return request.accept.best_match(["application/json", "text/html"], default="application/json") == "text/html"


def _page(ctx: Context, endpoint_id: str, error: ServiceError) -> str:
    e = html.escape
    ep = endpoint_id if ids.is_id(endpoint_id, "ep") else "EP"
    control = ctx.settings.control_url
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex">'
        '<link rel="icon" href="/favicon.ico"><title>hookyard inbox: no access</title>'
        '<link rel="stylesheet" href="/static/inbox.css"></head>'
        '<body><main class="refusal"><h1>This inbox did not open</h1>'
        f'<p class="reason" id="reason">{e(error.message)}</p>'
        "<h2>How to get a link that works</h2><ul>"
        "<li>Ask whoever gave you this address for a new link. An agent makes one with the MCP tool "
        "<code>create_inbox_link</code>; the <code>inbox_url</code> that <code>POST /api/start</code> answers "
        "opens a temporary endpoint's inbox for as long as the endpoint lives.</li>"
        f"<li>On the machine that runs hookyard: <code>hookyard open {e(ep)}</code></li>"
        f"<li>With an API key of the endpoint's account: <code>curl -X POST {e(control)}/v1/endpoints/{e(ep)}"
        '/inbox-link -H "Authorization: Bearer $HOOKYARD_API_KEY"</code></li></ul>'
        "<p>A link stops working when it expires, when the endpoint's links are rotated "
        "(<code>rotate_inbox_links</code>) or when the endpoint is deleted or expires. Opening one sets a "
        "cookie for this page only and removes the link from the address bar.</p></main></body></html>"
    )


def refusal(ctx: Context, endpoint_id: str, error: ServiceError, headers: dict[str, str]) -> Response[str]:
    """The refusal as a page, with the error's status and the inbox page's headers (CSP, no-store)."""
    return Response(
        _page(ctx, endpoint_id, error), status_code=status_of(error), media_type=MediaType.HTML, headers=headers
    )
