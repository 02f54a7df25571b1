"""The kinds of caller text ``control.records.text`` describes (a display name, an ``external_ref``, a signing
secret), checked again by the service layer, which is also called with values the /v1 decoder never saw
(MCP arguments, the CLI's argv): the same rules, with a 400 that names the field.

Each check starts with the storable-text rule (``control.records.storable.check_text``: no NUL, no lone
surrogate), then adds the kind's own: a length of 1 to 200 characters and a visible character for a name;
the same length, no control characters and no space at either end for an ``external_ref``; no whitespace or
control character at either end for a secret.
"""

from __future__ import annotations

import re
from typing import Any

from control.records.storable import check_text
from control.records.text import PATTERN_RULES, VISIBLE
from control.support.parameter_messages import text_length
from shared.errors import ValidationError

__all__ = ("check_external_ref", "check_name", "check_secret")

_VISIBLE = re.compile(VISIBLE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EDGE = re.compile(r"[\x00-\x20\x7f]")
_MAX = 200


def check_name(value: Any, field: str) -> Any:
    """A display name (``control.records.text.Name``): storable, with a visible character; None passes."""
    if value is None:
        return None
    check_text(value, field)
    if not 1 <= len(value) <= _MAX:
        raise ValidationError(text_length(field, 1, _MAX, value))
    if not _VISIBLE.search(value):
        raise ValidationError(f"{field}: {PATTERN_RULES[VISIBLE]}")
    return value


def check_external_ref(value: Any, field: str = "external_ref") -> Any:
    """An ``external_ref`` (``control.records.text.REF``), in a body or as a filter; None passes."""
    if value is None:
        return None
    check_text(value, field)
    if not 1 <= len(value) <= _MAX:
        raise ValidationError(text_length(field, 1, _MAX, value))
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
