"""A request whose ``Content-Encoding`` names a coding (``gzip``, ``deflate``, ``br``) is refused with 415
``unsupported_content_encoding``, on every route of the control plane: /v1, /mcp, /api/start and the rest.

The control plane never undoes a content coding, and it used to ignore the header: a body labelled gzip
whose bytes were plain JSON was read as JSON (the label was wrong, or a proxy had already inflated it and left
the header), and only one that failed to parse mentioned the coding. A header that says the bytes are not what
they are is refused whatever the bytes are, so a request means one thing. Refusing is the simpler safe choice
over inflating: nothing promises compressed bodies, control's bodies are small JSON, and an inflater would
need its own bound on the inflated size (a 2 MB gzip body can inflate to gigabytes). ``identity`` (or no
header) is the only coding taken, as RFC 9110 says a server answers a coding it does not support: 415 with
``Accept-Encoding``. The edge is another matter: it captures any body as sent, coded or not.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from shared.errors import UnsupportedEncodingError

__all__ = ("ContentEncodingMiddleware", "refused_coding")


def refused_coding(scope: Scope) -> str | None:
    """The request's ``Content-Encoding`` (each header of that name, comma-joined) when it names a coding
    other than ``identity``; None when there is none to refuse."""
    codings = [value.decode("latin-1") for name, value in scope.get("headers", ()) if name == b"content-encoding"]
    given = ", ".join(codings)
    tokens = [token.strip().lower() for token in given.split(",")]
    if all(token in ("", "identity") for token in tokens):
        return None
    return given.strip()


class ContentEncodingMiddleware(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        given = refused_coding(scope)
        if given is not None:
            shown = given if len(given) <= 40 else f"{given[:40]}..."
            raise UnsupportedEncodingError(
                f'Content-Encoding: must be identity or absent (request bodies are taken uncompressed), got "{shown}"'
            )
        await next_app(scope, receive, send)
