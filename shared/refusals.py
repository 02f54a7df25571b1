"""Requests the edge refuses for an endpoint, counted for its stats: the reasons and how Redis holds them.

The edge counts in process and adds its counts to Redis about once a second (``edge.refusals``); control
reads a window of them (``control.service.stats``). One hash per endpoint and UTC hour
(``Keys.edge_refusals``), one field per minute of that hour and reason, ``"07:signature_mismatch"``, so a
24-hour window reads 25 hashes and still starts on its minute. Each hash expires ``KEEP_S`` after its hour
ends, past any window that can read it.
"""

from __future__ import annotations

from typing import Final

__all__ = ("IP_NOT_ALLOWED", "KEEP_S", "REASONS", "SIGNATURE_REASONS", "expires_at", "field", "parse")

SIGNATURE_REASONS: Final = (
    "missing_header",
    "malformed_header",
    "malformed_timestamp",
    "timestamp_out_of_tolerance",
    "signature_mismatch",
)
"""A ``401 signature_invalid`` (``on_failure: reject``), by the failed check: ``signature_failure_reason``."""

IP_NOT_ALLOWED: Final = "ip_not_allowed"
"""A ``403 ip_not_allowed``: the source is not on the endpoint's allowlist (stored too when it logs them)."""

REASONS: Final = (*SIGNATURE_REASONS, IP_NOT_ALLOWED)

KEEP_S: Final = 25 * 3600
"""How long an hour's hash outlives its hour: a 24-hour window starts at most 24 hours and a minute back."""


def field(minute: int, reason: str) -> str:
    """The hash field of ``reason`` in the minute ``minute`` (Unix time // 60)."""
    return f"{minute % 60:02d}:{reason}"


def expires_at(hour: int) -> int:
    """Unix time at which the hash of ``hour`` (Unix time // 3600) is no longer read."""
    return (hour + 1) * 3600 + KEEP_S


def parse(name: bytes | str) -> tuple[int, str] | None:
    """A field's (minute of the hour, reason); None for a field this version does not know."""
    text = name.decode() if isinstance(name, bytes) else name
    minute, _, reason = text.partition(":")
    if len(minute) != 2 or not minute.isdigit() or reason not in REASONS:
        return None
    return int(minute), reason
