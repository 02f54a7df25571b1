"""The vocabulary every scheme shares: the schemes, their header names per family, the verdict and its
failure reasons.

Apart from the schemes because detection, every scheme's check, signing, the compiled fast path's table
and attribution's provider order all read these names, and the table's order is the detection order (with
several signature headers present the first wins: identity, commerce, payments, code_host; the neutral name
before the real one). Verdicts are made once here, so a check returns a shared object and allocates none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, NamedTuple

__all__ = (
    "FAILURE_REASONS",
    "HEADERS",
    "IDENTITY_HEADERS",
    "IDENTITY_IDS",
    "IDENTITY_PAIRS",
    "MALFORMED_HEADER",
    "MALFORMED_TIMESTAMP",
    "MISSING_HEADER",
    "NO_HEADER",
    "SCHEMES",
    "SIGNATURE_HEADERS",
    "SIGNATURE_MISMATCH",
    "SIGNATURE_NAMES",
    "TIMESTAMP_OUT_OF_TOLERANCE",
    "VALID",
    "HeaderFamily",
    "Verdict",
    "verdict",
)

MISSING_HEADER: Final = "missing_header"
MALFORMED_HEADER: Final = "malformed_header"
MALFORMED_TIMESTAMP: Final = "malformed_timestamp"
TIMESTAMP_OUT_OF_TOLERANCE: Final = "timestamp_out_of_tolerance"
SIGNATURE_MISMATCH: Final = "signature_mismatch"
FAILURE_REASONS: Final = frozenset(
    {MISSING_HEADER, MALFORMED_HEADER, MALFORMED_TIMESTAMP, TIMESTAMP_OUT_OF_TOLERANCE, SIGNATURE_MISMATCH}
)

SCHEMES: Final = ("identity", "commerce", "payments", "code_host")
"""Also the provider values of attribution, in the order both modules check them."""

HeaderFamily = Literal["neutral", "standard", "vendor"]
"""Which header names to use: hookyard's neutral ones (``relay-*``, ``pay-signature``...), the Standard
Webhooks ``webhook-*`` ones (``identity`` only), or the real provider's (``svix-*``, ``stripe-signature``...)."""

IDENTITY_HEADERS: Final[Mapping[str, tuple[str, str, str]]] = {
    "neutral": ("relay-signature", "relay-id", "relay-timestamp"),
    "standard": ("webhook-signature", "webhook-id", "webhook-timestamp"),
    "vendor": ("svix-signature", "svix-id", "svix-timestamp"),
}
HEADERS: Final[Mapping[str, Mapping[str, tuple[str, str | None, str | None]]]] = {
    "identity": IDENTITY_HEADERS,
    "commerce": {"neutral": ("x-shop-hmac-sha256", None, None), "vendor": ("x-shopify-hmac-sha256", None, None)},
    "payments": {"neutral": ("pay-signature", None, None), "vendor": ("stripe-signature", None, None)},
    "code_host": {
        "neutral": ("x-codehost-signature-256", None, None),
        "vendor": ("x-hub-signature-256", None, None),
    },
}
"""scheme → family → (signature header, id header, timestamp header); id/timestamp only for ``identity``."""


class Verdict(NamedTuple):
    valid: bool
    reason: str | None
    """One of :data:`FAILURE_REASONS`; ``None`` when valid."""
    scheme: str | None
    """The detected scheme; ``None`` when there is no signature header at all."""


SIGNATURE_HEADERS: Final = {
    names[0].encode(): (scheme, family, rank)
    for rank, (scheme, family, names) in enumerate(
        (scheme, family, names) for scheme, families in HEADERS.items() for family, names in families.items()
    )
}
"""Every known signature header (as bytes, the form headers arrive in) → (scheme, family, detection rank)."""
SIGNATURE_NAMES: Final = frozenset(SIGNATURE_HEADERS)
IDENTITY_IDS: Final = {
    family: (id_name.encode(), ts_name.encode()) for family, (_, id_name, ts_name) in IDENTITY_HEADERS.items()
}
"""Per identity family, its (id header, timestamp header)."""
IDENTITY_PAIRS: Final = tuple(IDENTITY_IDS.values())
"""The (id, timestamp) header pairs in the order a custom header tries them."""

NO_HEADER: Final = Verdict(False, MISSING_HEADER, None)
"""No signature header at all: no scheme either."""
_VERDICTS: Final = {
    (scheme, reason): Verdict(reason is None, reason, scheme)
    for scheme in SCHEMES
    for reason in (None, *sorted(FAILURE_REASONS))
}
VALID: Final = {scheme: _VERDICTS[scheme, None] for scheme in SCHEMES}


def verdict(scheme: str, reason: str) -> Verdict:
    """The (shared) failing verdict of ``scheme`` for ``reason``."""
    return _VERDICTS[scheme, reason]
