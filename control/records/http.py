"""What the request records say about HTTP itself: a URL a delivery can go to, and header names and values
as every HTTP stack sends them. Apart from the destination records so that records about a destination's
parts (``control.records.destination_auth``) can use them without importing the destination."""

from __future__ import annotations

from typing import Annotated

from control.records.text import meaning, text

__all__ = ("HEADER_NAME", "HEADER_TOKEN", "HEADER_VALUE", "MAX_HEADER_NAME", "Url")

MAX_HEADER_NAME = 256
HEADER_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]"
"""One character of an RFC 9110 field-name (a token)."""
HEADER_NAME = meaning(
    rf"^{HEADER_TOKEN}+$", "must be a header name: letters, digits and !#$%&'*+.^_`|~- only (no spaces or colons)"
)
"""An RFC 9110 field-name."""
HEADER_VALUE = meaning(
    r"^[\t\x20-\x7e]*$", "must be printable ASCII, spaces and tabs only (it is sent in a header as it is)"
)
"""Visible ASCII, space and tab: what every HTTP stack sends as it is."""

Url = Annotated[
    str,
    text(
        max_length=2048,
        doc_pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x20\x7f]+$",
        format="uri",
        description="Absolute http or https URL with a host; no spaces or control characters",
    ),
]
