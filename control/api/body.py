"""Request bodies decoded strictly, as the OpenAPI document describes them.

Litestar reads a JSON body into plain Python values and then converts them to the handler's ``data`` type
with msgspec in lax mode (``strict=False``), which turns ``"true"`` and ``0`` into booleans and ``"300"``
into an integer. The document says ``boolean`` and ``integer``, and a client that sends a string there has
a bug it should hear about. So for handlers whose ``data`` is a msgspec Struct, the body is decoded here,
strictly, straight into that Struct (which Litestar's conversion then passes through unchanged): one
decoding, and the same errors (``name: Expected `str`, got `int```) as before.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import SerializationException, ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.types import Empty

__all__ = ("StrictJSONRequest", "decode_json")


def _decoder(handler: HTTPRouteHandler) -> msgspec.json.Decoder[Any] | None:
    """The strict decoder of the handler's ``data`` Struct, or None (no body, or not a Struct)."""
    field = handler.parsed_data_field
    if field is None or not field.is_subclass_of(msgspec.Struct):
        return None
    return _struct_decoder(field.annotation)


@cache
def _struct_decoder(struct: type[msgspec.Struct]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(struct, strict=True)


def decode_json(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """Named as Litestar's own decoder is: ``control.api.errors`` tells a caller's invalid UTF-8 from an internal
    ``UnicodeDecodeError`` by this frame."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        error = exc
    except msgspec.DecodeError as exc:
        where = _lone_surrogate(body)
        if where is not None:  # msgspec's own words for it are "Input data was truncated" or "invalid utf-16"
            raise ValidationException(
                detail="Validation failed", extra=[{"key": where, "message": _SURROGATE}]
            ) from exc
        raise SerializationException(str(exc)) from exc
    if "got `float`" in str(error):
        # JSON Schema's "integer" is a number without a fraction, so 300.0 is one; msgspec's strict mode
        # wants the literal 300. Read again with integral numbers as integers (lax mode would also take "300").
        try:
            return msgspec.convert(_integral(msgspec.json.decode(body)), decoder.type, strict=True)
        except msgspec.ValidationError as exc:
            error = exc
    raise ValidationException(detail="Validation failed", extra=[{"key": "body", "message": str(error)}]) from error


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


class StrictJSONRequest(Request[Any, Any, Any]):
    async def json(self) -> Any:
        decoder = _decoder(self.route_handler)
        if decoder is None:
            return await super().json()
        body = await self.body()
        if not body:  # Litestar's own path reports the missing body
            return await super().json()
        if self._json is Empty:
            cached = self._connection_state.json
            self._json = cached if isinstance(cached, msgspec.Struct) else decode_json(decoder, body)
            self._connection_state.json = self._json
        return self._json
