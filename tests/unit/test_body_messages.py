"""A request body's bad field in our words (``control.support.body_messages``): every form of msgspec's
refusal that a body can produce, and, for every request record /v1 decodes and every tool's arguments, a
wrong-typed value of each field named first and never worded in msgspec's (`` Expected `str`, got `int` ``)."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Annotated, Any, Literal

import msgspec
import pytest
from litestar.routes import HTTPRoute
from msgspec import Meta
from msgspec import inspect as mi

import control.mcp.tools  # noqa: F401 - registers the tools
from control.app import create_app
from control.mcp.registry import TOOLS
from control.support.body_messages import translate
from control.support.request_decoding import decode_json
from shared.errors import ValidationError
from shared.settings import load_settings

LIBRARY_WORDS = ("Expected `", "got `")


class _A(msgspec.Struct, kw_only=True, frozen=True, tag_field="type", tag="a"):
    x: int = 0


class _B(msgspec.Struct, kw_only=True, frozen=True, tag_field="type", tag="b"):
    y: int = 0


class _Forms(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One field of each constraint msgspec words a refusal of."""

    count: Annotated[int, Meta(ge=1, le=10)] = 1
    floor: Annotated[int, Meta(ge=0)] = 0
    step: Annotated[int, Meta(multiple_of=5)] = 5
    rate: Annotated[float, Meta(gt=0, le=100)] | None = None
    half: Annotated[float, Meta(multiple_of=0.5)] = 0.5
    word: Annotated[str, Meta(min_length=2, max_length=3)] | None = None
    note: Annotated[str, Meta(min_length=1)] = "n"
    shape: Annotated[str, Meta(pattern="^a+$")] = "a"
    items: Annotated[list[str], Meta(min_length=1, max_length=2)] = msgspec.field(default_factory=lambda: ["i"])
    pair: tuple[int, int] = (1, 2)
    labels: Annotated[dict[str, Annotated[str, Meta(max_length=2)]], Meta(max_length=2)] = msgspec.field(
        default_factory=dict
    )
    kind: Literal["on", "off"] = "on"
    mode: Literal["on", "off"] | None = None
    at: datetime.datetime | None = None
    day: datetime.date | None = None
    ref: uuid.UUID | None = None
    blob: bytes = b""
    flag: bool = False
    auth: _A | _B | None = None
    required: str


FORMS = [
    ({"count": 0}, "count: must be an integer from 1 to 10, got 0"),
    ({"count": 11}, "count: must be an integer from 1 to 10, got 11"),
    ({"count": "3"}, 'count: must be an integer from 1 to 10, got "3"'),
    ({"count": 1.5}, "count: must be an integer from 1 to 10, got 1.5"),
    ({"count": None}, "count: must be an integer from 1 to 10, got null"),
    ({"floor": -1}, "floor: must be an integer of at least 0, got -1"),
    ({"step": 7}, "step: must be a multiple of 5, got 7"),
    ({"rate": 0}, "rate: must be a number greater than 0 and at most 100, got 0"),
    ({"rate": "x"}, 'rate: must be a number or null, got "x"'),
    ({"half": 0.7}, "half: must be a multiple of 0.5, got 0.7"),
    ({"word": "a"}, "word: must be 2 to 3 characters long, got 1"),
    ({"word": 5}, "word: must be a string or null, got 5"),
    ({"word": ["x" * 60]}, "word: must be a string or null, got a JSON array"),
    ({"note": ""}, "note: must not be empty"),
    ({"shape": "b"}, "shape: must match the regular expression '^a+$'"),
    ({"items": []}, "items: must have 1 to 2 items, got 0"),
    ({"items": ["a", "b", "c"]}, "items: must have 1 to 2 items, got 3"),
    ({"items": ["a", 5]}, "items[1]: must be a string, got 5"),
    ({"items": "a"}, 'items: must be an array, got "a"'),
    ({"pair": [1]}, "pair: must have exactly 2 items, got 1"),
    ({"labels": {"a": "1", "b": "2", "c": "3"}}, "labels: must have at most 2 entries, got 3"),
    ({"labels": {"a": "1", "b": 5}}, "labels.b: must be a string, got 5"),
    ({"labels": {"a": "1", "b": "long"}}, "labels.b: must be at most 2 characters long, got 4"),
    ({"kind": "maybe"}, 'kind: must be one of off, on, got "maybe"'),
    ({"kind": 1}, "kind: must be one of off, on, got 1"),
    ({"kind": None}, "kind: must be one of off, on, got null"),
    ({"mode": "maybe"}, 'mode: must be one of off, on, or null, got "maybe"'),  # null was taken, and not said
    ({"mode": 1}, "mode: must be one of off, on, or null, got 1"),
    ({"at": "yesterday"}, 'at: must be an RFC 3339 date-time, got "yesterday"'),
    ({"at": 5}, "at: must be an RFC 3339 date-time or null, got 5"),
    ({"day": "1 May"}, 'day: must be an RFC 3339 date (YYYY-MM-DD), got "1 May"'),
    ({"ref": "x"}, 'ref: must be a UUID, got "x"'),
    ({"blob": "!!"}, 'blob: must be a base64-encoded string, got "!!"'),
    ({"flag": "maybe"}, 'flag: must be true or false, got "maybe"'),
    ({"flag": None}, "flag: must be true or false, got null"),
    ({"auth": {"type": "c"}}, 'auth.type: must be one of a, b, got "c"'),
    ({"auth": {"type": "b", "y": "s"}}, 'auth.y: must be an integer, got "s"'),
    ({"auth": "s"}, 'auth: must be an object or null, got "s"'),
    ({}, "required: required field is missing"),
    ({"surplus": 1}, "surplus: unknown field"),
]


@pytest.mark.parametrize(("body", "message"), FORMS, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(FORMS)])
def test_each_form_reads_in_our_words(body: dict[str, Any], message: str) -> None:
    assert _refusal(_Forms, {"required": "r", **body} if body and "required" not in body else body) == message


def test_a_body_that_is_no_object_says_so() -> None:
    assert _message(_Forms, b"[]") == "body: must be an object, got []"
    assert _message(_Forms, b'{"count": 0, ') == "count: must be an integer from 1 to 10"  # not JSON past it


def test_a_form_not_known_keeps_msgspecs_words() -> None:
    assert translate("a", "Expected a hashable value, got `dict`", None, None, {}) is None
    assert translate("a", "Expected `Point`, got `int`", None, 5, {}) is None


def _message(record: type[msgspec.Struct], raw: bytes) -> str:
    with pytest.raises(ValidationError) as refused:
        decode_json(msgspec.json.Decoder(record, strict=True), raw)
    return refused.value.message


def _refusal(record: type[msgspec.Struct], body: dict[str, Any]) -> str:
    return _message(record, json.dumps(body).encode())


# -- every record a body or a tool's arguments are decoded into ----------------------------------------------


def _records() -> set[type[msgspec.Struct]]:
    settings = load_settings({}, database_url="postgresql://nobody@127.0.0.1/none", redis_url="redis://127.0.0.1")
    app = create_app(settings)
    bodies = {
        handler.parsed_data_field.annotation
        for route in app.routes
        if isinstance(route, HTTPRoute)
        for handler in route.route_handlers
        if handler.parsed_data_field is not None and handler.parsed_data_field.is_subclass_of(msgspec.Struct)
    }
    tools = {r for spec in TOOLS.values() for r in (spec.arguments.plain, *spec.arguments.records.values())}
    return bodies | tools


_WRONG: list[tuple[Any, str]] = [(["x"], "array"), ({"x": 1}, "object"), (True, "bool"), (1.5, "float"), ("w", "str")]


def _accepts(node: Any) -> set[str]:
    """The JSON kinds a value of ``node`` may be given as."""
    while isinstance(node, mi.Metadata):
        node = node.type
    if isinstance(node, mi.UnionType):
        return {kind for member in node.types for kind in _accepts(member)}
    if isinstance(node, mi.AnyType):
        return {kind for _, kind in _WRONG}
    if isinstance(node, mi.LiteralType | mi.EnumType):
        return {"str" if isinstance(v, str) else "int" for v in getattr(node, "values", ())} or {"str", "int"}
    kinds = {
        mi.BoolType: "bool",
        mi.IntType: "int",
        mi.FloatType: "float",
        mi.NoneType: "null",
        mi.ListType: "array",
        mi.VarTupleType: "array",
        mi.TupleType: "array",
        mi.SetType: "array",
        mi.DictType: "object",
        mi.StructType: "object",
    }
    return {kinds.get(type(node), "str")}


def test_every_records_wrong_typed_field_is_named_first_in_our_words(subtests: Any) -> None:
    records = _records()
    assert len(records) >= 40, sorted(r.__name__ for r in records)  # the /v1 bodies and every tool's arguments
    checked = 0
    for record in sorted(records, key=lambda r: r.__name__):
        for field in mi.type_info(record).fields:
            accepted = _accepts(field.type)
            for wrong, kind in _WRONG:
                if kind in accepted or (kind == "float" and "int" in accepted and "float" in accepted):
                    continue
                with subtests.test(record=record.__name__, field=field.encode_name, given=kind):
                    message = _refusal(record, {field.encode_name: wrong})
                    assert message.startswith(f"{field.encode_name}: "), message
                    assert not any(words in message for words in LIBRARY_WORDS), message
                    checked += 1
    assert checked > 300, checked


def test_a_repeated_key_is_judged_last_wins() -> None:
    """msgspec judges each value of a repeated key as it reads it; the body is judged as it is kept, the last
    value winning (as Python's json, and so an MCP client, reads it), nested objects too."""
    assert _message(_Forms, b'{"required":"r","count":3,"count":0}') == "count: must be an integer from 1 to 10, got 0"
    kept = decode_json(msgspec.json.Decoder(_Forms, strict=True), b'{"required":"r","count":0,"count":3}')
    assert kept.count == 3
    nested = b'{"required":"r","auth":{"type":"b","y":"s","y":2}}'
    assert decode_json(msgspec.json.Decoder(_Forms, strict=True), nested).auth == _B(y=2)
    assert (
        _message(_Forms, b'{"required":"r","count":"x","count":2.0,"flag":"no"}')
        == 'flag: must be true or false, got "no"'
    )


def test_a_number_too_large_for_a_float_names_its_field_on_v1_and_mcp() -> None:
    """``1e999`` is JSON but no float: msgspec says ``Number out of range`` (a condition tree's path lost to
    ``[...]``), Python's json (an MCP client's) reads infinity. Both say the field and what it takes."""
    from control.mcp.arguments import decode
    from control.records.destinations import DestinationCreate
    from control.records.erasures import EraseRequest

    tree = '{"op":"AND","children":[{"field":"body.a","operator":"equals","value":-1e400}]}'
    got = "got a number too large to represent"
    for record, raw, message in [
        (_Forms, b'{"required":"r","rate":1e999}', f"rate: must be a number greater than 0 and at most 100, {got}"),
        (_Forms, b'{"required":"r","count":1e999}', f"count: must be an integer from 1 to 10, {got}"),
        (_Forms, b'{"required":"r","word":1e999}', f"word: must be a string or null, {got}"),
        (
            DestinationCreate,
            f'{{"url":"https://example.com/","condition_tree":{tree}}}'.encode(),
            "condition_tree.children[0].value: must be a number of at most about 1.8e308 in size (a 64-bit float), "
            + got,
        ),
        (  # a union: all it takes, and that a larger integer is written out (not only "must be a number")
            EraseRequest,
            b'{"field":"body.a","value":1e400}',
            "value: must be true or false, an integer, a number or a string (a number of at most about 1.8e308, a "
            f"64-bit float; a larger integer written out in its digits), {got}",
        ),
    ]:
        assert _message(record, raw) == message
        with pytest.raises(ValidationError) as refused:
            decode(record, json.loads(raw))
        assert refused.value.message == message
