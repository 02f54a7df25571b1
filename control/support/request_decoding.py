"""A caller's JSON decoded strictly into a request record, with messages that name the field: the /v1
bodies (``control.api.body``) and the MCP tools' arguments (``control.mcp.arguments``) alike, so both say
the same thing of the same mistake.

Strict, as the OpenAPI document describes the records: no ``"true"`` for a boolean, no ``"300"`` for an
integer (but ``300.0`` is one, as JSON Schema says), an unknown field refused, a lone surrogate named. The
message leads with the field and says what is wrong in our words, not msgspec's
(``control.support.body_messages``: ``limit: must be an integer from 1 to 100, got "20"``), and what a
record's regex means rather than quoting it (``control.records.text.PATTERN_RULES``).
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec

from control.records.text import PATTERN_RULES
from control.support.body_messages import MISSING, TOO_LARGE, locate, node_at, secret_at, translate, unhide_key
from shared.errors import ValidationError

__all__ = ("check_finite", "decode_json", "field_message", "too_large", "unknown_field")

_NAMED_FIELD_MESSAGES = {
    "Object contains unknown field": "unknown field",
    "Object missing required field": "required field is missing",
}
_MISSED = "Expected `str` matching regex "
"""msgspec says which regex a value missed (``repr`` of it); the records say what it means (``PATTERN_RULES``,
read when a message is made: a record module adds its patterns' words as it is imported)."""


def _rules() -> dict[str, str]:
    return {repr(pattern): rule for pattern, rule in PATTERN_RULES.items()}


def field_message(key: str | None, message: str) -> str:
    """``name: problem`` for one problem that msgspec (or a framework repeating it) reports at ``key``; a
    path in the message (`` - at `$.a.b` ``) wins over the key, and the field always leads."""
    path = message.rsplit(" - at `$", 1)
    where = ""
    if len(path) == 2:
        message, where = path[0], path[1].rstrip("`").lstrip(".")
    named = _NAMED_FIELD_MESSAGES.get(message.split("`", 1)[0].strip())
    if named and "`" in message:  # the problem is a field of the object: name that field, not the object
        field = message.split("`")[1]
        return f"{where}.{field}: {named}" if where else f"{field}: {named}"
    key = where or key
    if key in (None, "", "data", "body"):
        key = "body"
    if message.startswith(_MISSED):
        message = _rules().get(message.removeprefix(_MISSED), message)
    return f"{key}: {message}"


def decode_json(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """``body`` decoded by ``decoder`` (strict), or ``ValidationError`` naming the field; ``msgspec.DecodeError``
    when it is not JSON at all, which each caller words its own way. Named as Litestar's own decoder is:
    ``control.api.errors`` tells a caller's invalid UTF-8 from an internal ``UnicodeDecodeError`` by this frame."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        error = exc
    except msgspec.DecodeError as exc:
        where = _lone_surrogate(body)
        if where is not None:  # msgspec's own words for it are "Input data was truncated" or "invalid utf-16"
            raise ValidationError(field_message(where, _SURROGATE)) from exc
        raise
    integral = "got `float`" in str(error)
    if integral or _repeats_a_key(body):
        # JSON Schema's "integer" is a number without a fraction, so 300.0 is one; msgspec's strict mode
        # wants the literal 300. Read again with integral numbers as integers (lax mode would also take "300").
        # And of a key given twice msgspec judges each value as it reads it, so a first value it refuses is
        # refused though the last one (which it keeps when both pass, and which Python's json, and so an MCP
        # client, keeps) is fine: read again from the last-wins parse, so the value judged is the value kept,
        # and the one a message echoes.
        try:
            value = msgspec.json.decode(body)
        except msgspec.ValidationError:  # a number too large for a float: the first error says where
            raise ValidationError(_message(str(error), body, decoder.type)) from error
        if not integral:  # a repeated key: the last-wins value as it is, then (if a float was refused) as 300
            try:
                return msgspec.convert(value, decoder.type, strict=True)
            except msgspec.ValidationError as exc:
                error, integral = exc, "got `float`" in str(exc)
        if integral:
            try:
                return msgspec.convert(_integral(value), decoder.type, strict=True)
            except msgspec.ValidationError as exc:
                error = exc
    raise ValidationError(_message(str(error), body, decoder.type)) from error


def _message(error: str, body: bytes, record: Any) -> str:
    """msgspec's ``error`` about ``body`` decoded as ``record``, said in our words (``body_messages``)."""
    message = field_message("body", error)
    field, _, problem = message.partition(": ")
    if problem == _NAMED_FIELD_MESSAGES["Object contains unknown field"]:
        return unknown_field(field, record)
    text, at, where = error.rpartition(" - at `$")
    if not at:
        text, where = error, ""
    if problem in PATTERN_RULES.values() or text.split("`", 1)[0].strip() in _NAMED_FIELD_MESSAGES:
        return message
    where = where.rstrip("`").lstrip(".")
    if text == _TOO_LARGE:
        return too_large(record, _infinite(body, where), MISSING)
    try:
        value = msgspec.json.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):  # not JSON past the field, or a number too large
        value = MISSING
    where = unhide_key(value, where, text)
    given = MISSING if value is MISSING else locate(value, where)
    secret = secret_at(record, where, value)
    translated = translate(where or "body", text, node_at(record, where, value), given, _rules(), secret=secret)
    return translated or message


_TOO_LARGE = "Number out of range"


def too_large(record: Any, where: str, value: Any) -> str:
    """``where: must be ..., got a number too large to represent`` for a number larger than any float (JSON's
    ``1e999``, which Python's json, and so an MCP client, reads as infinity) at ``where`` in ``record``."""
    return translate(where or "body", TOO_LARGE, node_at(record, where, value), MISSING, {}) or f"{where}: {TOO_LARGE}"


def _infinite(body: bytes, where: str) -> str:
    """The path of the number too large for a float that msgspec refused at ``where``, which hides a key of an
    object it does not know the fields of (a condition tree's ``[...]``); ``where`` when it cannot be told."""
    head = where.partition("[...]")[0]
    try:
        return _first_infinite(json.loads(body), head) or where
    except (ValueError, RecursionError):
        return where


def _first_infinite(value: Any, head: str = "") -> str | None:
    """The path of the first infinite number in ``value`` under ``head`` (Python's json reads ``1e999`` so)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and math.isinf(item) and path.startswith(head):
            return path
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), child) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None


def check_finite(record: Any, value: Any) -> None:
    """``ValidationError`` for an infinite number in ``value`` (a tool's arguments, read by Python's json), as
    the body decoder refuses ``1e999``: JSON has no infinity to write it back as."""
    where = _first_infinite(value)
    if where is not None:
        raise ValidationError(too_large(record, where, value))


def unknown_field(field: str, *records: Any) -> str:
    """``field: unknown field``, or the records' own word for a field they do not take but another operation
    does (``MOVED_FIELDS``): a destination's ``signing_scheme`` in a PATCH is changed by rotating, which a bare
    "unknown field" hides. The MCP tools' arguments say it alike (``control.mcp.arguments``)."""
    for record in records:
        hint = (getattr(record, "MOVED_FIELDS", None) or {}).get(field)
        if hint:
            return f"{field}: {hint}"
    return f"{field}: unknown field"


class _Repeated(Exception):
    """A JSON object of the body has a key twice."""


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) < len(pairs):
        raise _Repeated
    return dict(pairs)


def _repeats_a_key(body: bytes) -> bool:
    """Whether some object of ``body`` (JSON) has a key twice; False for a body that is not JSON."""
    try:
        json.loads(body, object_pairs_hook=_no_repeats)
    except _Repeated:
        return True
    except (ValueError, RecursionError):
        return False
    return False


def _integral(value: Any) -> Any:
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


_SURROGATE = (
    "must not contain lone UTF-16 surrogates (an unpaired \\ud800 to \\udfff escape); they are not Unicode text"
)


def _unpaired(text: str) -> bool:
    return not text.isascii() and any("\ud800" <= c <= "\udfff" for c in text)


def _lone_surrogate(body: bytes) -> str | None:
    """Where the body has a string with an unpaired surrogate escape (``"\\ud800"``), which msgspec refuses
    and Python's ``json`` reads: the field's path, ``body`` for the top level; None when that is not why."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _unpaired(item):
                return path or "body"
        elif isinstance(item, dict):
            for key, child in item.items():
                if _unpaired(key):
                    return path or "body"
                stack.append((f"{path}.{key}" if path else key, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None
