"""How a stored body is shown in the API: exact bytes in Postgres, text or base64 in JSON.

Events, deliveries and the replay outcome all carry bodies that are bytes on the wire (a provider's
request, what a destination was sent and answered). JSON holds text, so a body is shown as its text when
the bytes are UTF-8 (NUL included: JSON escapes it) and as base64 otherwise, with an ``*_encoding`` field
saying which. Never lossy: decoding the shown value per its encoding gives back the stored bytes.
"""

from __future__ import annotations

import base64
from typing import Literal

__all__ = ("BodyEncoding", "shown_body")

BodyEncoding = Literal["utf8", "base64"]


def shown_body(raw: bytes | None, *, utf8: bool = True) -> tuple[str | None, BodyEncoding]:
    """``(body, encoding)``: the text when ``raw`` is UTF-8, else its base64; ``(None, "utf8")`` for None.
    ``utf8=False`` is a caller's prior knowledge that the bytes are not UTF-8 (skips the attempt); a wrong
    True costs one failed decode, never a wrong answer."""
    if raw is None:
        return None, "utf8"
    if utf8:
        try:
            return raw.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(raw).decode("ascii"), "base64"
