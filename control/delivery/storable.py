"""Informational text of a delivery attempt, made storable instead of failing the write.

Postgres ``text`` and ``jsonb`` cannot hold NUL (U+0000), and a lone UTF-16 surrogate (U+D800 to U+DFFF,
which Python strings can carry: ``surrogateescape``, ``json.loads('"\\ud800"')``) cannot be encoded as
UTF-8 at all. Either one in a delivery row failed the whole group commit of attempt results it was part
of. The text around an attempt (the headers as sent, the destination's name and URL, error messages built
from exceptions) describes the attempt; it is not the payload. So rather than refusing the record, this
one rule applies to it, once, where the row is built:

    every NUL and every lone surrogate becomes U+FFFD (the replacement character); nothing else changes.

Bodies are not text here: they are stored as the exact bytes (bytea) and never pass through this.
"""

from __future__ import annotations

import re
from typing import TypeVar

__all__ = ("REPLACEMENT", "storable")

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

T = TypeVar("T")


def storable(value: T) -> T:
    """``value`` with NUL and lone surrogates replaced by U+FFFD: a string, or the keys and values of a
    (nested) dict or list, as jsonb takes them; anything else unchanged."""
    if isinstance(value, str):
        if value.isascii():  # the usual case: only NUL can be wrong, and it almost never is
            return value.replace("\x00", REPLACEMENT) if "\x00" in value else value  # type: ignore[return-value]
        return _UNSTORABLE.sub(REPLACEMENT, value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [storable(v) for v in value]  # type: ignore[return-value]
    return value
