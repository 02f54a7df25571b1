"""The text a value is compared as, and the number a rule value stands for.

Its own module because it is the one definition of what "equal" means between a JSON value in an event and
a value in a rule, used by the conditions (``equals``, ``contains``, ``regex`` all compare text forms) and
by label rules (``control.routing.labels``: a label's value is the text form of what its path reads), so a
value means the same in a label as in a condition. Neither function raises on any value, JSON or not.
"""

from __future__ import annotations

import json
import math
import re

import msgspec

__all__ = ("as_number", "text_form")

_encode = msgspec.json.Encoder().encode
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def text_form(value: object) -> str:
    """The text a value is compared as: strings as they are, numbers as JSON (``2000``, ``20.5``),
    ``true``/``false``/``null``, objects and arrays as compact JSON. Never raises."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    try:
        return _encode(value).decode()
    except Exception:  # noqa: BLE001 - not JSON (lone surrogates, foreign objects): a stable text anyway
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
        except Exception:  # noqa: BLE001 - e.g. a circular structure
            return repr(value)


def as_number(value: object) -> int | float | None:
    """The number a rule value stands for (``2000``, ``"2000"``, ``"2e3"``), or None."""
    if type(value) is int or type(value) is float:
        return value
    if isinstance(value, str) and len(value) <= 400 and _JSON_NUMBER.fullmatch(value):
        try:
            number: int | float = float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            return None
        # An int is always finite (and math.isfinite of one past 1e308 overflows): only a float may be inf.
        return number if type(number) is int or math.isfinite(number) else None
    return None
