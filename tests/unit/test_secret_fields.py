"""A secret given in the wrong shape is still a secret: every field marked ``SECRET_FIELD`` (``writeOnly``) in
every record a /v1 body or a tool's arguments are decoded into is refused with its kind and length only, never
its value; and every field that looks like a secret (its name, or a description that says it is never
returned) carries the mark. A fresh-clone trial found ``{"secret": ["whsec_..."]}`` answered
``secret: must be a string or null, got ["whsec_..."]``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from msgspec import inspect as mi

from control.support.request_decoding import decode_json
from shared.errors import ValidationError
from tests.unit.test_body_messages import _records

SENTINEL = "whsec_SENTINEL_value_never_shown"
LOOKS_SECRET = re.compile(r"secret|password|(^|_)token$|private_key|resign_with")
SAYS_SECRET = ("never returned", "write-only", "sealed")


def _members(node: Any) -> Iterator[Any]:
    """``node``'s alternatives (a union's members, ``Metadata`` unwrapped), each with the metadata it had."""
    if isinstance(node, mi.Metadata) and isinstance(node.type, mi.UnionType):
        yield from _members(node.type)
    elif isinstance(node, mi.UnionType):
        for member in node.types:
            yield from _members(member)
    else:
        yield node


def _bare(node: Any) -> Any:
    while isinstance(node, mi.Metadata):
        node = node.type
    return node


def _marked(node: Any) -> bool:
    return any(isinstance(m, mi.Metadata) and (m.extra_json_schema or {}).get("writeOnly") for m in _members(node))


def _said(node: Any) -> str:
    return " ".join(json.dumps(m.extra_json_schema or {}) for m in _members(node) if isinstance(m, mi.Metadata))


def _fields(node: Any, body: dict[str, Any], path: str) -> Iterator[tuple[str, Any, dict[str, Any], str]]:
    """(name, declared type, a body reaching the field, its path) for every field of the record ``node``,
    through nested records and tagged unions (each tag's record)."""
    for field in _bare(node).fields:
        where = f"{path}.{field.encode_name}" if path else field.encode_name
        yield field.encode_name, field.type, body, where
        for member in _members(field.type):
            record = _bare(member)
            if isinstance(record, mi.StructType):
                inner = {record.tag_field: record.tag} if record.tag_field else {}
                yield from _fields(record, {**body, "_at": (where, inner)}, where)


def _put(where: str, tags: dict[str, dict[str, Any]], value: Any) -> dict[str, Any]:
    names = where.split(".")
    body: dict[str, Any] = {}
    node = body
    for i, name in enumerate(names[:-1]):
        prefix = ".".join(names[: i + 1])
        node[name] = dict(tags.get(prefix, {}))
        node = node[name]
    node[names[-1]] = value
    return body


def _fields_where(
    wanted: Callable[[Any], bool],
) -> list[tuple[type[msgspec.Struct], str, dict[str, dict[str, Any]]]]:
    """(record, path, the tags that reach it) for every field of every request record whose type is ``wanted``."""
    found = []
    for record in sorted(_records(), key=lambda r: r.__name__):
        for _, declared, reach, where in _fields(mi.type_info(record), {}, ""):
            if wanted(declared):
                tags: dict[str, dict[str, Any]] = {}
                while "_at" in reach:
                    (at, inner), reach = reach["_at"], {k: v for k, v in reach.items() if k != "_at"}
                    tags[at] = inner
                found.append((record, where, tags))
    return found


def _secret_fields() -> list[tuple[type[msgspec.Struct], str, dict[str, dict[str, Any]]]]:
    return _fields_where(_marked)


def test_every_field_that_looks_secret_is_marked() -> None:
    unmarked = sorted(
        {
            f"{record.__name__}.{where}"
            for record in _records()
            for name, declared, _, where in _fields(mi.type_info(record), {}, "")
            if (LOOKS_SECRET.search(name) or any(words in _said(declared).lower() for words in SAYS_SECRET))
            and not _marked(declared)
            and name != "token_url"
        }
    )
    assert unmarked == []


WRONG = [[SENTINEL], {"t": SENTINEL}, SENTINEL + "\x01 ", True, 12345678901234567]


def test_no_secret_field_echoes_its_value(subtests: Any) -> None:
    fields = _secret_fields()
    names = {where.rsplit(".", 1)[-1] for _, where, _ in fields}
    expected = {"secret", "verify_token", "password", "token", "value", "client_secret", "private_key"}
    assert expected | {"resign_with", "api_token"} <= names, names
    for record, where, tags in fields:
        for wrong in WRONG:
            with subtests.test(record=record.__name__, field=where, given=type(wrong).__name__):
                body = json.dumps(_put(where, tags, wrong)).encode()
                try:
                    decode_json(msgspec.json.Decoder(record, strict=True), body)
                except ValidationError as refused:
                    message = refused.message
                else:  # any string passes the decoder (the service checks it): nothing to show
                    assert isinstance(wrong, str), where
                    continue
                assert "SENTINEL" not in message, message
                assert "1234567" not in message, message
                if where in message:
                    assert message.startswith(f"{where}: "), message


def test_a_secret_of_the_wrong_kind_says_its_kind_and_length() -> None:
    from control.records.trust import AuthConfigUpdate

    decoder = msgspec.json.Decoder(AuthConfigUpdate, strict=True)
    for given, words in [
        ([SENTINEL], "an array of 1 item"),
        ({"t": SENTINEL}, "an object"),
        (5, "a number"),
        (True, "a boolean"),
    ]:
        with pytest.raises(ValidationError) as refused:
            decode_json(decoder, json.dumps({"secret": given}).encode())
        assert refused.value.message == f"secret: must be a string or null, got {words}"


def _holds_secret(node: Any, seen: set[type]) -> bool:
    """``node`` is a record, or a union of records, with a secret field at any depth."""
    records = [_bare(m) for m in _members(node) if isinstance(_bare(m), mi.StructType)]
    for record in records:
        if record.cls in seen:
            continue
        seen.add(record.cls)
        if any(_marked(f.type) or _holds_secret(f.type, seen) for f in record.fields):
            return True
    return False


def _secret_holders() -> list[tuple[type[msgspec.Struct], str, dict[str, dict[str, Any]]]]:
    """Every field of every body or tool record whose type is a record (or a union of records) that holds a
    secret: a destination's ``auth``, an OAuth or mTLS block within it..."""
    return _fields_where(lambda declared: not _marked(declared) and _holds_secret(declared, set()))


def test_a_record_holding_a_secret_given_as_another_kind_is_not_echoed(subtests: Any) -> None:
    """A fresh-clone trial: ``{"auth": "Bearer tok_..."}`` answered ``auth: must be an object or null, got
    "Bearer tok_..."``: the secret given where its record was declared is still the secret."""
    holders = _secret_holders()
    assert {"DestinationCreate.auth", "DestinationUpdate.auth"} <= {f"{r.__name__}.{w}" for r, w, _ in holders}
    for record, where, tags in holders:
        for wrong in ["Bearer " + SENTINEL, [SENTINEL], 12345678901234567, True]:
            with subtests.test(record=record.__name__, field=where, given=type(wrong).__name__):
                body = json.dumps(_put(where, tags, wrong)).encode()
                with pytest.raises(ValidationError) as refused:
                    decode_json(msgspec.json.Decoder(record, strict=True), body)
                message = refused.value.message
                assert "SENTINEL" not in message, message
                assert "1234567" not in message, message
                assert message.startswith(f"{where}: must be "), message
                assert "got a string of" in message or not isinstance(wrong, str), message
