"""The one check of a URL hookyard sends to (a destination's, a replay's, a token endpoint's): its shape only.

Which addresses may be reached is the egress policy's business at connect time
(``control.delivery.egress``), so a URL on a private address passes here and is refused (or not) when used.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from control.records.storable import check_text
from shared.errors import ValidationError

__all__ = ("check_url",)


def check_url(url: str, *, where: str = "url") -> str:
    """An absolute http(s) URL with a host, as given; ValidationError naming ``where`` otherwise."""
    check_text(url, where)
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise ValidationError(f"{where}: must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ValidationError(f"{where}: not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{where}: must be an absolute http or https URL, e.g. https://example.com/hooks")
    if port == 0:
        raise ValidationError(f"{where}: port 0 cannot be connected to")
    return url
