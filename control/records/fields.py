"""The condition-tree field syntax as a wire contract: ``body``, ``body.<path>``, ``header.<name>``,
``meta.<key>`` and ``meta.label.<key>``.

The names live here, in the lowest layer, so that a request record naming a field (an erasure's ``field``)
can state the exact syntax in its OpenAPI pattern, and the validator in ``control.routing.conditions``
checks the very same names: a client generating requests from the document (schemathesis does) never sends
a field the validator refuses.
"""

from __future__ import annotations

from typing import Final

__all__ = ("FIELD_PATTERN", "HEADER_NAME", "LABEL_KEY", "LABEL_PREFIX", "META_KEYS")

META_KEYS: Final = (
    "provider",
    "event_type",
    "method",
    "path",
    "content_type",
    "source_ip",
    "signature_valid",
    "ip_allowed",
    "endpoint_id",
    "environment",
)
LABEL_PREFIX: Final = "label."
"""``meta.label.<key>``: the value of the event's label ``<key>`` (labels are computed before routing)."""
HEADER_NAME: Final = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
"""An HTTP field name (RFC 9110 token)."""
LABEL_KEY: Final = r"[A-Za-z0-9_-]{1,64}"
"""A label's output key (``control.records.labels.OUTPUT_KEY``)."""

FIELD_PATTERN: Final = (
    r"^(body|body(\.[^.\x00]+)+|header\."
    + HEADER_NAME
    + r"|meta\.(label\."
    + LABEL_KEY
    + "|"
    + "|".join(META_KEYS)
    + "))$"
)
"""Every field the validator accepts, as one regular expression (checked against it in tests/unit)."""
