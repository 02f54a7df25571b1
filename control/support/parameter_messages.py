"""What a refused path or query parameter is told, worded once for /v1 and for the MCP tools.

/v1 reads a query parameter from text (``control.api.params``, ``control.api.errors``); a tool gets the same
parameter as a JSON value (``control.mcp.parameters``). Both refuse a value with these functions, so one bad
input reads the same on both, and no library's wording (msgspec's ``Expected `int`, got `str```) reaches a
caller of either. What was given is shown as JSON shows it: a tool's value as it is, a query's text as the
number it reads as (``?limit=-1`` is the tool's ``limit: -1``) or else as the string it is (``?limit=abc``
reads ``got "abc"``, as the tool's ``limit: "abc"`` does; it once read ``got abc``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from shared.errors import ValidationError

__all__ = (
    "PAGE_SIZE",
    "check_limit",
    "choices_words",
    "kind_words",
    "not_an_instant",
    "not_boolean",
    "not_one_of",
    "out_of_range",
    "query_text",
    "shown",
    "text_length",
    "wrong_length",
    "wrong_type",
)

PAGE_SIZE = "Page size"
"""What a list's ``limit`` counts: its declaration's description in /v1, and so in every message about it."""

_SHOWN = 40
"""A given value longer than this is not echoed (a message names the field, it does not quote a blob)."""


def _json(given: object) -> str:
    return json.dumps(given, ensure_ascii=False, separators=(",", ":"))


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def query_text(text: str) -> str:
    """A query parameter's text as a message shows it, as JSON would show what a tool was given: text that is
    a JSON number as that number (``-1``, ``1.5``), any other text as a JSON string (``"abc"``)."""
    return text if _JSON_NUMBER.fullmatch(text) else _json(text)


def not_boolean(name: str, given: object) -> str:
    """A boolean parameter: ``true`` or ``false`` (the query's words, or JSON's booleans). What was given is
    shown as JSON, a string in double quotes (``got "maybe"``) as every other string a message echoes."""
    return f"{name}: must be true or false, got {_json(given)}"


def out_of_range(name: str, low: int, high: int, what: str | None, given: object) -> str:
    """An integer parameter with both bounds, past one or no integer at all: the whole range and what it
    counts (``limit: must be an integer from 1 to 100 (page size), got 500``), not only the bound crossed."""
    meaning = f" ({what[0].lower()}{what[1:]})" if what else ""
    shown = "" if given is None else given if isinstance(given, str) else _json(given)
    got = f", got {shown}" if shown and len(shown) <= _SHOWN else ""
    return f"{name}: must be an integer from {low} to {high}{meaning}{got}"


_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def kind_words(*kinds: str) -> str:
    """What a value of these JSON Schema types is, in words: ``a string or null``."""
    words = [_KINDS.get(kind, kind) for kind in kinds]
    return (
        words[0] if len(words) == 1 else f"{', '.join(words[:-1])}{',' if ' or ' in words[-2] else ''} or {words[-1]}"
    )


def shown(given: object) -> str:
    """A given JSON value as a message shows it: as JSON, or only its kind when longer than a message
    should quote (``a JSON string``)."""
    text = _json(given)
    if len(text) > _SHOWN:
        return f"a JSON {'array' if isinstance(given, list) else 'object' if isinstance(given, dict) else 'string'}"
    return text


def not_an_instant(name: str, given: str) -> str:
    """``since``/``until``: the text given shown as JSON (``got "yesterday"``), as every parameter's is (it
    once read ``'yesterday' is not ...``, Python's quotes)."""
    return f"{name}: must be an ISO 8601 date-time (2026-11-21T10:00:00Z) or date (2026-11-21), got {shown(given)}"


def wrong_type(name: str, kind: str, given: object) -> str:
    """A JSON value of another type than the parameter's (a query has only text, so only a tool sees this)."""
    return f"{name}: must be {kind_words(kind)}, got {shown(given)}"


def check_limit(limit: int, high: int) -> None:
    """A list's ``limit`` from 1 to ``high``, the services' own check behind /v1's and the tools' (a caller of
    the service function that passed neither still gets the same words)."""
    if not 1 <= limit <= high:
        raise ValidationError(out_of_range("limit", 1, high, PAGE_SIZE, limit))


_UNITS = {"str": ("character", "characters"), "bytes": ("byte", "bytes"), "array": ("item", "items")}
_UNITS["object"] = ("entry", "entries")


def wrong_length(kind: str, low: int | None, high: int | None, size: int | None) -> str:
    """``must be 16 to 1024 characters long, got 15``: the size given, never the value (it may be a secret).
    The one wording of a length, for a body field (``control.support.body_messages``) and a service's check
    of a parameter alike (``text_length``): ``q`` once read ``at most 200 characters``, a name ``must be 1 to
    200 characters long, got 0``."""
    one, many = _UNITS[kind]
    got = "" if size is None else f", got {size}"
    n: int | None
    if low is not None and high is not None:
        bound = f"exactly {low}" if low == high else f"{low} to {high}"
        n = high
    elif low == 1 and kind == "str":
        return "must not be empty"
    else:
        bound, n = (f"at least {low}", low) if low is not None else (f"at most {high}", high)
    unit = one if n == 1 else many
    return f"must be {bound} {unit} long{got}" if kind == "str" else f"must have {bound} {unit}{got}"


def text_length(name: str, low: int | None, high: int | None, given: str) -> str:
    """A text of the wrong length, checked by a service: ``q: must be at most 200 characters long, got 201``."""
    return f"{name}: {wrong_length('str', low, high, len(given))}"


def choices_words(values: Iterable[object], *, null: bool = False) -> str:
    """``must be one of a, b`` (``, or null`` when null is taken too)."""
    return f"must be one of {', '.join(str(v) for v in values)}{', or null' if null else ''}"


def not_one_of(name: str, values: Iterable[object], given: object) -> str:
    """A value outside its choices, checked by a service: ``lang: must be one of typescript, zod, got "py"``,
    as a body field's is (it once read ``'py' is not one of ...``, Python's quotes, or named no value)."""
    return f"{name}: {choices_words(values)}, got {shown(given)}"
