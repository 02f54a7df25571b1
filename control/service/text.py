"""Caller text that ends up in Postgres: refused with a 400 naming the field when Postgres could not hold it.

Postgres ``text`` and ``jsonb`` cannot hold NUL (U+0000), and asyncpg cannot encode a lone UTF-16 surrogate
(U+D800..U+DFFF, which is not a Unicode scalar value) as UTF-8. Either reaching a query is a failed statement:
a 500 for what is the caller's mistake. The JSON decoder of /v1 already refuses lone surrogate escapes, but
the service layer is also called with values decoded elsewhere (MCP arguments go through Python's ``json``,
which accepts ``"\\ud800"``; the CLI reads argv with surrogate escapes), so every service function checks
the text it writes or queries with, here, once per field.
"""

from __future__ import annotations

import re
from typing import Any

from control.records.text import PATTERN_RULES, VISIBLE, text_problem
from shared.errors import ValidationError

__all__ = ("check_external_ref", "check_name", "check_secret", "check_text")

_VISIBLE = re.compile(VISIBLE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EDGE = re.compile(r"[\x00-\x20\x7f]")
_MAX = 200


def check_text(value: Any, field: str) -> Any:
    """``value`` unchanged when it is not a string or is storable text; ValidationError naming ``field``."""
    if isinstance(value, str) and (problem := text_problem(value)) is not None:
        raise ValidationError(f"{field}: {problem}")
    return value


def check_name(value: Any, field: str) -> Any:
    """A display name (``control.records.text.Name``): storable, with a visible character; None passes."""
    if value is None:
        return None
    check_text(value, field)
    if not 1 <= len(value) <= _MAX:
        raise ValidationError(f"{field}: must be 1 to {_MAX} characters long")
    if not _VISIBLE.search(value):
        raise ValidationError(f"{field}: {PATTERN_RULES[VISIBLE]}")
    return value


def check_external_ref(value: Any, field: str = "external_ref") -> Any:
    """An ``external_ref`` (``control.records.text.REF``), in a body or as a filter; None passes."""
    if value is None:
        return None
    check_text(value, field)
    if not 1 <= len(value) <= _MAX:
        raise ValidationError(f"{field}: must be 1 to {_MAX} characters long")
    if _CONTROL.search(value):
        raise ValidationError(f"{field}: must not contain control characters (tab, newline...)")
    if value[0] == " " or value[-1] == " ":
        raise ValidationError(f"{field}: must not start or end with a space")
    return value


def check_secret(value: Any, field: str = "secret") -> Any:
    """A signing secret (``control.records.text.SECRET``); None passes."""
    if value is None:
        return None
    check_text(value, field)
    if _EDGE.fullmatch(value[:1]) or _EDGE.fullmatch(value[-1:]):
        # A pasted secret with a stray newline would make every delivery fail verification, silently.
        raise ValidationError(f"{field}: must not start or end with whitespace or a control character")
    return value
