"""The checks of a URL hookyard sends to (a destination's, a replay's, a token endpoint's, an alert's).

``check_url`` checks the shape only. ``check_outbound_url`` adds what the egress policy can tell from the
URL alone: under ``HOOKYARD_EGRESS=public`` a host that is an internal IP literal or ``localhost`` would be
refused at every send, so it is refused when written, naming the field and the range (nothing the caller
did not write). Any other name is not resolved here: the address it resolves to is the egress policy's
business at connect time (``control.delivery.egress``), which says nothing about it (see there why).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from control.records.storable import check_text
from control.support.internal_addresses import written_refusal
from shared.errors import ValidationError

__all__ = ("check_outbound_url", "check_url")


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


def check_outbound_url(url: str, egress: str, *, where: str = "url") -> str:
    """``check_url``, and under ``public`` egress no host every send would be refused for (see above)."""
    check_url(url, where=where)
    if egress == "public" and (reason := written_refusal(httpx.URL(url).host)) is not None:
        raise ValidationError(
            f"{where}: {reason}, which this instance does not deliver to (HOOKYARD_EGRESS=public; any allows it)"
        )
    return url
