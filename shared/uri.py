"""A request target's raw bytes as text that says exactly what the URL says and that Postgres can always hold.

The edge stores the path and query as the sender wrote them (ASGI ``raw_path`` and ``query_string``), not
the server's percent-decoded ``path``: decoding is lossy (``/a%FFb`` decodes to ``a\\ufffdb``, and a decoded
``%2F`` cannot be told from ``/``) and can yield NUL, which a Postgres ``text`` column refuses. Printable
ASCII (what an ordinary URL consists of, percent escapes included) is kept verbatim. Any other byte (a
control character, or a raw UTF-8 byte that granian lets through, as in ``/h/t\\xc3\\xa9ok``) becomes
``%XX``, the escape a browser would have written: percent-decoding the text gives the same bytes as
percent-decoding what was sent, and the text is always printable ASCII, so never NUL or invalid UTF-8.

Both the edge (on every request) and the workers (for records of older edges) may need it; the usual target
is plain ASCII and costs one decode and one check.

>>> uri_text(b"/h/tok/a%FFb%e9%00")
'/h/tok/a%FFb%e9%00'
>>> uri_text(b"/h/t\\xc3\\xa9ok")
'/h/t%C3%A9ok'
"""

from __future__ import annotations

from typing import Final

__all__ = ("uri_text",)

_ESCAPED: Final = tuple(chr(b) if 0x20 <= b < 0x7F else f"%{b:02X}" for b in range(256))


def uri_text(raw: bytes) -> str:
    """``raw`` with every byte outside printable ASCII (0x20-0x7E) percent-encoded; the rest verbatim."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return "".join(map(_ESCAPED.__getitem__, raw))
    if text.isprintable():
        return text
    return "".join(map(_ESCAPED.__getitem__, raw))
