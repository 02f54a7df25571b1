"""A tool's JSON arguments, decoded as strictly as /v1 decodes a request, with the same messages.

A tool's parameters (after ``call``) are of two kinds. A parameter typed with a msgspec Struct (a request
record such as ``EndpointCreate``) contributes that record's fields as tool arguments, flattened, and
receives the record; every other parameter is a tool argument of its own (the /v1 path and query
parameters). Both are decoded by the strict JSON decoder of the /v1 bodies (``control.support.request_decoding``):
no ``"true"`` for a boolean, ``300.0`` accepted as an integer, an unknown field refused, a lone surrogate
named. The failure messages are the ones a /v1 caller reads for the same fields, and what the decoder
leaves to the service (NUL characters, ranges, id shapes) the service checks for both. An argument that is a
/v1 path or query parameter is checked before this, in /v1's query words (``control.mcp.parameters``).
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, TypeVar

import msgspec

from control.records.text import DocumentedAs
from control.support.request_decoding import check_finite, decode_json, unknown_field
from shared.errors import ValidationError
from shared.json_depth import check_value

__all__ = ("Arguments", "decode")

T = TypeVar("T", bound=msgspec.Struct)


@cache
def _decoder(record: type[msgspec.Struct]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(record, strict=True)


def decode(record: type[T], values: Mapping[str, Any]) -> T:
    """``values`` as ``record``, or ``ValidationError`` naming the field. The values are written out as JSON
    (lone surrogates escaped, as a client sends them) and read back by the /v1 body decoder itself."""
    check_value(values)  # before json.dumps recurses into it (``shared.json_depth``)
    check_finite(record, values)  # 1e999, read as infinity: refused as /v1 refuses it
    try:
        decoded: T = decode_json(_decoder(record), json.dumps(values).encode())
        return decoded
    except msgspec.DecodeError as exc:  # a value JSON cannot carry (NaN, Infinity)
        raise ValidationError(f"arguments: not valid JSON ({exc})") from None


def _is_record(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, msgspec.Struct)


def _names(record: type[msgspec.Struct]) -> dict[str, bool]:
    """Argument name → required, for each field of ``record``."""
    return {f.encode_name: f.required for f in msgspec.structs.fields(record)}


def _takes_null(kind: Any) -> bool:
    """The field takes null: its type is ``X | None``, or a member of it is documented so (``DocumentedAs``: a
    condition tree, decoded as any JSON and checked by its service, is documented as taking null or not), or
    it is any JSON."""
    members = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)
    for member in members:
        documented = [m.annotation for m in getattr(member, "__metadata__", ()) if isinstance(m, DocumentedAs)]
        if documented:
            if _takes_null(documented[0]):
                return True
            continue
        info = msgspec.inspect.type_info(member)
        if isinstance(info, msgspec.inspect.Metadata):
            info = info.type
        if isinstance(info, (msgspec.inspect.AnyType, msgspec.inspect.NoneType)):
            return True
    return False


def _null_as_absent(record: type[msgspec.Struct]) -> set[str]:
    """The optional fields whose type refuses null: for them a null argument is "not given" (its default)."""
    return {f.encode_name for f in msgspec.structs.fields(record) if not f.required and not _takes_null(f.type)}


class Arguments:
    """How one tool's arguments become its adapter's keyword arguments."""

    __slots__ = ("names", "null_as_absent", "plain", "records")

    def __init__(self, plain: type[msgspec.Struct], records: dict[str, type[msgspec.Struct]]) -> None:
        self.plain = plain
        self.records = records
        self.names: dict[str, bool] = _names(plain)
        """Every argument the tool takes → whether it is required."""
        for record in records.values():
            clash = self.names.keys() & _names(record).keys()
            if clash:
                raise ValueError(f"{record.__name__} repeats the argument(s) {sorted(clash)}")
            self.names.update(_names(record))
        self.null_as_absent: frozenset[str] = frozenset().union(*map(_null_as_absent, (plain, *records.values())))
        """Optional arguments whose type refuses null, which a tool takes as "not given", as it takes an optional
        /v1 parameter (``control.mcp.parameters.given``): ``headers: null`` as ``event_type: null``. A null
        that means something (``external_ref: null`` clears it) is in its field's type, so never here."""

    @classmethod
    def of(cls, fn: Callable[..., Any], hints: Mapping[str, Any]) -> Arguments:
        parameters = list(inspect.signature(fn).parameters.values())[1:]  # the first is ``call``
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        records: dict[str, type[msgspec.Struct]] = {}
        for parameter in parameters:
            annotation = hints[parameter.name]
            if _is_record(annotation):
                records[parameter.name] = annotation
            elif parameter.default is inspect.Parameter.empty:
                fields.append((parameter.name, annotation))
            else:
                fields.append((parameter.name, annotation, parameter.default))
        plain = msgspec.defstruct(f"{fn.__name__}_arguments", fields, kw_only=True, forbid_unknown_fields=True)
        return cls(plain, records)

    def decode(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(arguments.keys() - self.names.keys())
        if unknown:
            raise ValidationError("; ".join(self._unknown(name) for name in unknown))
        arguments = {k: v for k, v in arguments.items() if v is not None or k not in self.null_as_absent}
        plain_names = msgspec.structs.fields(self.plain)
        plain = decode(self.plain, {f.name: arguments[f.name] for f in plain_names if f.name in arguments})
        kwargs = {f.name: getattr(plain, f.name) for f in plain_names}
        for parameter, record in self.records.items():
            fields = _names(record)
            kwargs[parameter] = decode(record, {k: v for k, v in arguments.items() if k in fields})
        return kwargs

    def _unknown(self, name: str) -> str:
        """The records' own word for a field moved elsewhere, or the names the tool takes, as /v1 names the
        query parameters an operation takes (``control.api.query_names``): ``id`` for ``endpoint_id``."""
        said = unknown_field(name, *self.records.values())
        if said != unknown_field(name):
            return said
        return f"{said} (this tool takes: {', '.join(sorted(self.names)) or 'no arguments'})"
