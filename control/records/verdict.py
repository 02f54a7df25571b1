"""How a stored signature verdict reads to a person, in one wording wherever it is shown: ``hookyard tail``,
``hookyard up``'s activity lines and the inbox page (``control/static/inbox.js`` spells the same words).

``verified``: the signature checks out with the endpoint's secret (the provider's, or for what hookyard signs
itself, its own); ``invalid: <reason>``: checked and failed (its reason, docs/reference/signatures.md); ``not checked``:
verification is off and nothing was proven, which says nothing about the request.
"""

from __future__ import annotations

__all__ = ("INVALID", "NOT_CHECKED", "VERIFIED", "verdict_text")

VERIFIED = "verified"
INVALID = "invalid"
NOT_CHECKED = "not checked"


def verdict_text(valid: bool | None, reason: str | None) -> str:
    if valid is None:
        return NOT_CHECKED
    if valid:
        return VERIFIED
    return f"{INVALID}: {reason}" if reason else INVALID
