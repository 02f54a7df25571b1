"""Request bodies decoded strictly, as the OpenAPI document describes them.

Litestar reads a JSON body into plain Python values and then converts them to the handler's ``data`` type
with msgspec in lax mode (``strict=False``), which turns ``"true"`` and ``0`` into booleans and ``"300"``
into an integer. The document says ``boolean`` and ``integer``, and a client that sends a string there has
a bug it should hear about. So for handlers whose ``data`` is a msgspec Struct, the body is decoded here,
strictly, straight into that Struct (which Litestar's conversion then passes through unchanged): one
decoding, and errors in our words (``name: must be a string, got 5``), worded as the MCP tools word theirs
(``control.support.request_decoding``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import SerializationException
from litestar.handlers import HTTPRouteHandler
from litestar.types import Empty

from control.support.request_decoding import decode_json
from shared.json_depth import check_bytes

__all__ = ("StrictJSONRequest",)


def _decoder(handler: HTTPRouteHandler) -> msgspec.json.Decoder[Any] | None:
    """The strict decoder of the handler's ``data`` Struct, or None (no body, or not a Struct)."""
    field = handler.parsed_data_field
    if field is None or not field.is_subclass_of(msgspec.Struct):
        return None
    return _struct_decoder(field.annotation)


@cache
def _struct_decoder(struct: type[msgspec.Struct]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(struct, strict=True)


def _decoded(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    """The body strictly decoded (``control.support.request_decoding``). A field's problem is its ``ValidationError``
    (400 ``validation_error``); a body that is not JSON is Litestar's own ``SerializationException``, which it
    turns into the 400 that ``control.api.errors`` words as malformed JSON."""
    try:
        return decode_json(decoder, body)
    except msgspec.DecodeError as exc:
        raise SerializationException(str(exc)) from exc


class StrictJSONRequest(Request[Any, Any, Any]):
    async def json(self) -> Any:
        decoder = _decoder(self.route_handler)
        body = await self.body()
        if self._json is Empty:
            check_bytes(body)  # before any decoder recurses into it (``shared.json_depth``)
        if decoder is None:
            return await super().json()
        if not body:  # Litestar's own path reports the missing body
            return await super().json()
        if self._json is Empty:
            cached = self._connection_state.json
            self._json = cached if isinstance(cached, msgspec.Struct) else _decoded(decoder, body)
            self._connection_state.json = self._json
        return self._json
