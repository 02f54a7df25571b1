"""Every pattern a request record's string must match says what it means (``PATTERN_RULES``): a 400 names the
rule, never the regex (docs/reference/errors.md). A fresh-clone trial found `header_name`, `output_key`,
`color`, a replay's `destination_id`, `response.content_type` and a bearer `auth.token` (escaped twice:
`must match the regular expression '^[\\\\t\\\\x20-\\\\x7e]*$'`) answered with the regex."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from msgspec import inspect as mi

from control.records.destinations import DestinationCreate
from control.records.endpoints import EndpointUpdate
from control.records.labels import LabelRuleCreate
from control.records.replay import ReplayRequest
from control.records.text import PATTERN_RULES
from control.records.trust import AuthConfigUpdate
from control.support.request_decoding import decode_json
from shared.errors import ValidationError
from tests.unit.test_body_messages import _records


def _patterns(node: Any, where: str, seen: set[type], found: dict[str, set[str]]) -> None:
    """Every ``pattern`` of a string in ``node`` -> where it is, through records, unions, arrays and dicts."""
    if isinstance(node, mi.Metadata):
        _patterns(node.type, where, seen, found)
    elif isinstance(node, mi.UnionType):
        for member in node.types:
            _patterns(member, where, seen, found)
    elif isinstance(node, mi.StructType) and node.cls not in seen:
        for field in node.fields:
            _patterns(field.type, f"{where}.{field.encode_name}".lstrip("."), seen | {node.cls}, found)
    elif isinstance(node, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        _patterns(node.item_type, f"{where}[]", seen, found)
    elif isinstance(node, mi.TupleType):
        for item in node.item_types:
            _patterns(item, f"{where}[]", seen, found)
    elif isinstance(node, mi.DictType):
        _patterns(node.key_type, f"{where} (a key)", seen, found)
        _patterns(node.value_type, f"{where}.*", seen, found)
    elif isinstance(node, mi.StrType) and node.pattern:
        found.setdefault(node.pattern, set()).add(where)


def test_every_pattern_of_every_request_record_has_a_meaning() -> None:
    found: dict[str, set[str]] = {}
    for record in _records():
        _patterns(mi.type_info(record), "", set(), found)
    assert len(found) >= 8, found
    unexplained = {pattern: sorted(where) for pattern, where in found.items() if pattern not in PATTERN_RULES}
    assert unexplained == {}


@pytest.mark.parametrize(
    ("record", "body", "message"),
    [
        (AuthConfigUpdate, {"header_name": "x sig"}, "header_name: must be a header name: letters, digits and"),
        (LabelRuleCreate, {"path": "a", "output_key": "a b"}, "output_key: must be 1 to 64 letters, digits, _ or -"),
        (LabelRuleCreate, {"path": "a", "output_key": "k", "color": "red"}, "color: must be a colour as # and six hex"),
        (
            ReplayRequest,
            {"destination_id": "dst_x"},
            "destination_id: must be an id of this kind: dst_ and a ULID (26 characters)",
        ),
        (EndpointUpdate, {"response": {"content_type": "text"}}, "response.content_type: must be a media type"),
        (
            DestinationCreate,
            {"url": "https://example.com/", "auth": {"type": "bearer", "token": "a\u00e9b"}},
            "auth.token: must be printable ASCII, spaces and tabs only",
        ),
    ],
)
def test_a_missed_pattern_reads_as_its_meaning(
    record: type[msgspec.Struct], body: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        decode_json(msgspec.json.Decoder(record, strict=True), json.dumps(body).encode())
    assert refused.value.message.startswith(message), refused.value.message
    assert "regular expression" not in refused.value.message
