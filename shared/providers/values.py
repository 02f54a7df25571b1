"""Reading a catalog :class:`~shared.providers.model.Where` from a request: a header, a dotted body path, a
fixed name.

The body is decoded at most once per request (:class:`Body`), and only when a value lives in it: JSON, or a
form body (``application/x-www-form-urlencoded``, Twilio's). A path that does not lead to a non-empty string
or an integer, a body that is not JSON, or one nested too deep simply yields ``None``: attribution never
fails a request. A path may list alternatives, ``event.type|type``: the first that yields a value wins.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import parse_qsl

import msgspec

from shared.headers import RawHeaders, header_text
from shared.providers.model import Where

__all__ = ("Body", "put", "read", "text_of", "walk")

_FORM: Final = b"application/x-www-form-urlencoded"
_MAX_VALUE: Final = 1000
"""Longer values are not an event type or an id (the event's columns stay small)."""
_MISSING: Final = object()


class Body:
    """A request body decoded on first use: a JSON value, a form's fields, or nothing readable."""

    __slots__ = ("_decoded", "headers", "raw")

    def __init__(self, headers: RawHeaders, raw: bytes) -> None:
        self.headers = headers
        self.raw = raw
        self._decoded: Any = _MISSING

    @property
    def value(self) -> Any:
        if self._decoded is _MISSING:
            self._decoded = _decode(self.headers, self.raw)
        return self._decoded

    def form(self) -> list[tuple[str, str]] | None:
        """A form body's fields in arrival order; None when the body is not a form."""
        if not self.headers.get(b"content-type", b"").lower().startswith(_FORM):
            return None
        return parse_qsl(self.raw.decode("utf-8", "replace"), keep_blank_values=True)


def _decode(headers: RawHeaders, raw: bytes) -> Any:
    if headers.get(b"content-type", b"").lower().startswith(_FORM):
        return dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


def walk(value: Any, path: str) -> Any:
    """The value at a dotted path (``entry.0.id``), or None where the path leads nowhere."""
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def put(value: Any, path: str, text: str) -> None:
    """Sets the text at a dotted path of a decoded body (the samples' and test signers' way to write a token or
    a signature where the provider puts it); a path that leads nowhere changes nothing."""
    *parents, last = path.split(".")
    for part in parents:
        value = value[int(part)] if isinstance(value, list) and part.isdigit() else value.get(part, {})
    if isinstance(value, dict):
        value[last] = text


def text_of(value: Any) -> str:
    """A body value as a provider's signed text: a string as is, a number as written, ``true``/``false``,
    nothing for anything else (absent, null, an object)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return ""


def _text(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value and len(value) <= _MAX_VALUE:
        return value
    return None


def read(where: Where | None, headers: RawHeaders, body: Body) -> str | None:
    """The text ``where`` points at in this request; None when it is not there."""
    if where is None:
        return None
    if where.header is not None:
        value = headers.get(where.header.encode())
        return header_text(value) if value else None
    if where.body is not None:
        decoded = body.value
        if decoded is None:
            return None
        for path in where.body.split("|"):
            found = _text(walk(decoded, path))
            if found is not None:
                return found
        return None
    return where.fixed
