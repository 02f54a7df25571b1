"""GET /static/{name}: the few files the control plane's pages load, shipped in the package
(``control/static``) so the pages work with no network beyond this server.

- ``inbox.js``, ``curl.js`` (its "copy as curl"), ``hexdump.js`` (a binary body's raw tab), ``pretty.js`` (a
  JSON body indented and coloured from its own text), ``resign.js`` (the header a re-signed replay uses by
  default), ``inbox.css``:
  the inbox page (``control.api.inbox.page``), written here, no framework; ``transform.js`` and ``transform.css``:
  its transform editor (a dry run and a replay through a transform, on the event shown); ``alerts.js``: its
  banner of the endpoint's open alerts.
- ``redoc.standalone.js``: the OpenAPI page at ``/schema``, Redoc pinned at the version in ``VENDORED``
  (MIT, its licence beside it). A page that loads its script from a CDN is blank offline and changes under
  its users when the CDN's "latest" does.

- ``favicon.ico``, also at ``/favicon.ico``, where browsers ask for it unprompted (a 404 there was an error
  in every page's console).

Only the names listed are served; each answer carries a strong ETag (the content's hash) and ``no-cache``,
so a browser revalidates with one 304 and an upgrade is picked up at once.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

from shared.errors import NotFoundError

__all__ = ("VENDORED", "favicon", "static_file")

VENDORED = {
    "redoc.standalone.js": "redoc 2.5.4 (npm), bundles/redoc.standalone.js (3.x ships an ES module instead), with one "
    'change: its footer logo, its only remote asset, is `src:"data:,"` (the image hides itself when it fails)'
}
_TYPES = {
    "inbox.js": "text/javascript; charset=utf-8",
    "curl.js": "text/javascript; charset=utf-8",
    "hexdump.js": "text/javascript; charset=utf-8",
    "pretty.js": "text/javascript; charset=utf-8",
    "resign.js": "text/javascript; charset=utf-8",
    "favicon.ico": "image/x-icon",
    "inbox.css": "text/css; charset=utf-8",
    "transform.js": "text/javascript; charset=utf-8",
    "alerts.js": "text/javascript; charset=utf-8",
    "destinations.js": "text/javascript; charset=utf-8",
    "transform.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "redoc.LICENSE.txt": "text/plain; charset=utf-8",
}


@cache
def _load(name: str) -> tuple[bytes, str]:
    content = resources.files("control").joinpath("static", name).read_bytes()
    return content, '"' + hashlib.sha256(content).hexdigest()[:32] + '"'


@get("/static/{name:str}", include_in_schema=False, sync_to_thread=False)
def static_file(name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
    return _answer(name, request)


@get("/favicon.ico", include_in_schema=False, sync_to_thread=False)
def favicon(request: Request[Any, Any, Any]) -> Response[bytes]:
    return _answer("favicon.ico", request)


def _answer(name: str, request: Request[Any, Any, Any]) -> Response[bytes]:
    kind = _TYPES.get(name)
    if kind is None:
        raise NotFoundError(f"no static file {name!r}")
    content, etag = _load(name)
    headers = {"etag": etag, "cache-control": "no-cache", "x-content-type-options": "nosniff"}
    if request.headers.get("if-none-match") == etag:
        return Response(b"", status_code=304, headers=headers)
    return Response(content, media_type=kind, headers=headers)
