"""Condition trees: every operator on every kind of field, missing and null values, text-form comparisons,
groups to the depth limit, validation messages with exact paths, RE2's linear time, and properties over
arbitrary JSON and events (hypothesis)."""

from __future__ import annotations

import copy
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.api.errors import status_of
from control.routing import conditions
from control.routing.conditions import (
    MAX_DEPTH,
    MAX_NODES,
    META_KEYS,
    MISSING,
    OPERATORS,
    EventView,
    InvalidConditionTree,
    compile_tree,
    matches,
    text_form,
    validate,
)
from shared.errors import ValidationError

NO_VALUE = object()  # a leaf without "value"

META = {
    "provider": "payments",
    "event_type": "invoice.paid",
    "method": "POST",
    "path": "/sub/path",
    "content_type": "application/json; charset=utf-8",
    "source_ip": "203.0.113.7",
    "signature_valid": True,
    "ip_allowed": False,
    "endpoint_id": "ep_01JAAAAAAAAAAAAAAAAAAAAAAA",
    "environment": "staging",
}

EVENT = EventView(
    body={
        "type": "invoice.paid",
        "amount": 2000,
        "ratio": 20.5,
        "paid": True,
        "refunded": False,
        "note": None,
        "empty": "",
        "0": "zero key",
        "big": 10**30,
        "nested": {"k": 1, "list": []},
        "data": {
            "object": {
                "id": "in_1",
                "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
                "tags": ["vip", "eu", 3, True, None],
            }
        },
    },
    headers={"x-shop-topic": "orders/create", "content-type": "application/json", "x-count": "5"},
    meta=META,
)


def leaf(field: str, operator: str, value: Any = NO_VALUE) -> dict[str, Any]:
    node: dict[str, Any] = {"field": field, "operator": operator}
    if value is not NO_VALUE:
        node["value"] = value
    return node


def group(op: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"op": op, "children": list(children)}


def check(tree: dict[str, Any], event: EventView) -> bool:
    result = compile_tree(validate(tree))(event)
    assert type(result) is bool
    return result


# -- operators x fields ---------------------------------------------------------------------------------

CASES = [
    # equals: text forms, numbers as numbers
    ("body.type", "equals", "invoice.paid", True),
    ("body.type", "equals", "invoice", False),
    ("body.type", "equals", "INVOICE.PAID", False),
    ("body.amount", "equals", 2000, True),
    ("body.amount", "equals", "2000", True),
    ("body.amount", "equals", 2000.0, True),
    ("body.amount", "equals", "2e3", True),
    ("body.amount", "equals", "2000.5", False),
    ("body.amount", "equals", 2001, False),
    ("body.amount", "equals", True, False),
    ("body.ratio", "equals", 20.5, True),
    ("body.ratio", "equals", "20.5", True),
    ("body.ratio", "equals", "20.50", True),
    ("body.big", "equals", "1000000000000000000000000000000", True),
    ("body.big", "equals", 10**30, True),
    ("body.paid", "equals", True, True),
    ("body.paid", "equals", "true", True),
    ("body.paid", "equals", 1, False),
    ("body.paid", "equals", "True", False),
    ("body.refunded", "equals", False, True),
    ("body.refunded", "equals", "false", True),
    ("body.refunded", "equals", "", False),
    ("body.note", "equals", None, True),
    ("body.note", "equals", "null", True),
    ("body.note", "equals", "", False),
    ("body.empty", "equals", "", True),
    ("body.empty", "equals", None, False),
    ("body.nested", "equals", '{"k":1,"list":[]}', True),
    ("body.nested.list", "equals", "[]", True),
    ("body.data.object.tags", "equals", '["vip","eu",3,true,null]', True),
    ("header.x-count", "equals", 5, True),
    ("header.x-count", "equals", "5", True),
    ("header.x-count", "equals", 5.0, False),  # a header is a string: "5" is not "5.0"
    # not_equals is the negation of equals
    ("body.type", "not_equals", "invoice.paid", False),
    ("body.type", "not_equals", "other", True),
    ("body.amount", "not_equals", "2000", False),
    ("body.paid", "not_equals", "true", False),
    ("body.note", "not_equals", None, False),
    ("body.note", "not_equals", "x", True),
    # contains: substring on strings, membership on arrays, key on objects, text form otherwise
    ("body.type", "contains", "paid", True),
    ("body.type", "contains", "", True),
    ("body.type", "contains", "PAID", False),
    ("body.data.object.tags", "contains", "vip", True),
    ("body.data.object.tags", "contains", "vi", False),
    ("body.data.object.tags", "contains", 3, True),
    ("body.data.object.tags", "contains", "3", True),
    ("body.data.object.tags", "contains", True, True),
    ("body.data.object.tags", "contains", "true", True),
    ("body.data.object.tags", "contains", None, True),
    ("body.data.object.tags", "contains", "us", False),
    ("body.nested.list", "contains", "", False),
    ("body.data.object", "contains", "id", True),
    ("body.data.object", "contains", "in_1", False),
    ("body.amount", "contains", "00", True),
    ("body.amount", "contains", 20, True),
    ("body.amount", "contains", "3", False),
    ("body.paid", "contains", "ru", True),
    ("body.note", "contains", "ul", True),
    # exists: present, even null
    ("body.type", "exists", NO_VALUE, True),
    ("body.note", "exists", NO_VALUE, True),
    ("body.empty", "exists", NO_VALUE, True),
    ("body.refunded", "exists", NO_VALUE, True),
    ("body.nope", "exists", NO_VALUE, False),
    ("body", "exists", NO_VALUE, True),
    # regex: RE2 search over the text form
    ("body.type", "regex", r"^invoice\.", True),
    ("body.type", "regex", "paid$", True),
    ("body.type", "regex", "^paid", False),
    ("body.type", "regex", "(?i)INVOICE", True),
    ("body.type", "regex", "INVOICE", False),
    ("body.amount", "regex", "^20+$", True),
    ("body.ratio", "regex", r"^\d+\.5$", True),
    ("body.paid", "regex", "^true$", True),
    ("body.note", "regex", "^null$", True),
    ("body.data.object.tags", "regex", '"vip"', True),
    ("body.data.object.lines.1", "regex", '"qty":1', True),
    ("body.empty", "regex", "^$", True),
    ("body.empty", "regex", ".", False),
    # nested paths and array indices
    ("body.data.object.id", "equals", "in_1", True),
    ("body.data.object.lines.0.sku", "equals", "A-1", True),
    ("body.data.object.lines.1.sku", "equals", "B-2", True),
    ("body.data.object.lines.1.qty", "equals", 1, True),
    ("body.data.object.lines.2.sku", "exists", NO_VALUE, False),
    ("body.data.object.lines.00.sku", "equals", "A-1", True),
    ("body.data.object.lines.-1.sku", "exists", NO_VALUE, False),
    ("body.data.object.lines.x", "exists", NO_VALUE, False),
    ("body.data.object.tags.4", "exists", NO_VALUE, True),
    ("body.data.object.tags.4", "equals", None, True),
    ("body.0", "equals", "zero key", True),  # a numeric segment is an ordinary key on an object
    ("body.type.x", "exists", NO_VALUE, False),  # no descending into a string
    ("body.amount.0", "exists", NO_VALUE, False),
    ("body.data.object.lines.99999999999999999999999", "exists", NO_VALUE, False),
    # headers: names case-insensitive
    ("header.x-shop-topic", "equals", "orders/create", True),
    ("header.X-Shop-Topic", "equals", "orders/create", True),
    ("header.X-SHOP-TOPIC", "contains", "orders", True),
    ("header.x-shop-topic", "equals", "Orders/Create", False),
    ("header.Content-Type", "regex", "^application/json$", True),
    ("header.x-missing", "exists", NO_VALUE, False),
    ("header.x-shop-topic", "exists", NO_VALUE, True),
]


@pytest.mark.parametrize(("field", "operator", "value", "expected"), CASES)
def test_operator_on_field(field, operator, value, expected):
    assert check(leaf(field, operator, value), EVENT) is expected


@pytest.mark.parametrize("key", META_KEYS)
def test_every_meta_key_is_readable(key):
    value = META[key]
    assert check(leaf(f"meta.{key}", "exists"), EVENT) is True
    assert check(leaf(f"meta.{key}", "equals", value), EVENT) is True
    assert check(leaf(f"meta.{key}", "equals", text_form(value)), EVENT) is True
    assert check(leaf(f"meta.{key}", "not_equals", value), EVENT) is False
    assert check(leaf(f"meta.{key}", "not_equals", "something else"), EVENT) is True
    assert check(leaf(f"meta.{key}", "contains", text_form(value)[:2]), EVENT) is True
    assert check(leaf(f"meta.{key}", "regex", "^" + re.escape(text_form(value)) + "$"), EVENT) is True
    # a null meta value (unattributed provider, verification off, ...) is missing
    nulled = EventView(body=EVENT.body, headers=EVENT.headers, meta={**META, key: None})
    assert check(leaf(f"meta.{key}", "exists"), nulled) is False
    assert check(leaf(f"meta.{key}", "equals", value), nulled) is False
    assert check(leaf(f"meta.{key}", "not_equals", value), nulled) is True
    absent = EventView(body=EVENT.body, headers=EVENT.headers, meta={})
    assert check(leaf(f"meta.{key}", "exists"), absent) is False


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("meta.signature_valid", True, True),
        ("meta.signature_valid", "true", True),
        ("meta.signature_valid", False, False),
        ("meta.ip_allowed", False, True),
        ("meta.ip_allowed", "false", True),
        ("meta.method", "post", False),
        ("meta.source_ip", "203.0.113.7", True),
    ],
)
def test_meta_comparisons(field, value, expected):
    assert check(leaf(field, "equals", value), EVENT) is expected


MISSING_FIELDS = [
    ("body.nope", EVENT),
    ("body.data.nope.deeper", EVENT),
    ("body.data.object.lines.5", EVENT),
    ("body.type.length", EVENT),
    ("header.x-nope", EVENT),
    ("meta.provider", EventView(body={}, meta={"provider": None})),
    ("body", EventView(body=MISSING)),  # not JSON
    ("body.type", EventView(body=MISSING, headers=EVENT.headers, meta=META)),
    ("body.a", EventView(body="just a string")),
    ("body.0", EventView(body=[])),
]


@pytest.mark.parametrize(("field", "event"), MISSING_FIELDS)
@pytest.mark.parametrize("operator", OPERATORS)
def test_a_missing_field_makes_every_operator_false_but_not_equals(field, event, operator):
    value = {"exists": NO_VALUE, "regex": ".*"}.get(operator, "")
    assert check(leaf(field, operator, value), event) is (operator == "not_equals")


@pytest.mark.parametrize("value", ["null", None, "", "x", 0, False])
def test_missing_is_not_null(value):
    event = EventView(body={"a": None})
    assert check(leaf("body.b", "equals", value), event) is False
    assert check(leaf("body.b", "not_equals", value), event) is True


@pytest.mark.parametrize(
    ("body", "field", "value", "expected"),
    [
        ("hello", "body", "hello", True),
        (2000, "body", "2000", True),
        (None, "body", None, True),
        ([{"a": 1}], "body.0.a", 1, True),
        ([{"a": 1}], "body.1.a", 1, False),
        ([[1, 2], [3]], "body.1.0", 3, True),
        ({"a": {"b": {"c": {"d": "deep"}}}}, "body.a.b.c.d", "deep", True),
        ({"a.b": 1}, "body.a.b", 1, False),  # dots always split the path
    ],
)
def test_body_roots_and_paths(body, field, value, expected):
    assert check(leaf(field, "equals", value), EventView(body=body)) is expected


# -- groups ---------------------------------------------------------------------------------------------

T = leaf("body.type", "equals", "invoice.paid")
F = leaf("body.type", "equals", "nope")


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        (group("AND"), True),
        (group("OR"), False),
        (group("AND", T), True),
        (group("AND", F), False),
        (group("OR", T), True),
        (group("OR", F), False),
        (group("AND", T, T), True),
        (group("AND", T, F), False),
        (group("AND", F, T), False),
        (group("OR", F, T), True),
        (group("OR", F, F), False),
        (group("AND", T, T, T, T), True),
        (group("AND", T, T, T, F), False),
        (group("OR", F, F, F, T), True),
        (group("OR", F, F, F, F), False),
        (group("AND", group("OR", F, T), group("OR", T, F)), True),
        (group("AND", group("OR", F, F), T), False),
        (group("OR", group("AND"), F), True),
        (group("AND", group("OR"), T), False),
        (group("OR", group("AND", T, group("OR", F, group("AND", T, T))), F), True),
        (T, True),  # a leaf alone is a tree
        (F, False),
    ],
)
def test_groups(tree, expected):
    assert check(tree, EVENT) is expected


@pytest.mark.parametrize("event", [EVENT, EventView(), EventView(body=MISSING, headers={}, meta={})])
def test_empty_and_matches_every_event_and_empty_or_none(event):
    assert check(group("AND"), event) is True
    assert check(group("OR"), event) is False


def nest(depth: int, innermost: dict[str, Any]) -> dict[str, Any]:
    """``depth`` levels in all: depth-1 groups, alternating AND/OR, around ``innermost``."""
    tree = innermost
    for level in range(depth - 1):
        tree = group("AND" if level % 2 else "OR", tree)
    return tree


def test_nesting_to_the_depth_limit_evaluates():
    assert check(nest(MAX_DEPTH, T), EVENT) is True
    assert check(nest(MAX_DEPTH, F), EVENT) is False
    assert check(nest(MAX_DEPTH, group("OR")), EVENT) is False


def test_wide_trees_up_to_the_node_limit_evaluate():
    children = [leaf("body.amount", "equals", i) for i in range(MAX_NODES - 1)]
    assert check(group("OR", *children), EVENT) is False
    children[-1] = leaf("body.amount", "equals", 2000)
    assert check(group("OR", *children), EVENT) is True
    assert check(group("AND", *children), EVENT) is False


# -- text form ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("as is", "as is"),
        ("", ""),
        (2000, "2000"),
        (-7, "-7"),
        (20.5, "20.5"),
        (2000.0, "2000.0"),
        (10**30, "1000000000000000000000000000000"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ({"a": 1, "b": [1, "x", None]}, '{"a":1,"b":[1,"x",null]}'),
        ([], "[]"),
        ({}, "{}"),
        ("é ünïcode", "é ünïcode"),
    ],
)
def test_text_form(value, text):
    assert text_form(value) == text


def test_text_form_never_raises():
    class Foreign:
        def __repr__(self) -> str:
            return "<foreign>"

    circular: list[Any] = []
    circular.append(circular)
    assert text_form(Foreign()) == '"<foreign>"'
    assert isinstance(text_form(circular), str)
    assert text_form(["\ud800"]) == '["\ud800"]'
    assert text_form(float("nan")) == "null"


# -- validation -----------------------------------------------------------------------------------------

INVALID = [
    # root
    ([], "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got array"),
    ("AND", "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got string"),
    (None, "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got null"),
    (3, "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got number"),
    ({}, "condition_tree: empty object; expected a group {op, children} or a leaf {field, operator, value}"),
    (
        {"kind": "x"},
        "condition_tree.kind: unknown key; a group has op and children, a leaf field, operator and value",
    ),
    # groups
    ({"children": []}, 'condition_tree.op: required in a group ("AND" or "OR")'),
    ({"op": "and", "children": []}, 'condition_tree.op: must be "AND" or "OR", got "and"'),
    ({"op": "NOT", "children": []}, 'condition_tree.op: must be "AND" or "OR", got "NOT"'),
    ({"op": 1, "children": []}, 'condition_tree.op: must be "AND" or "OR", got number'),
    ({"op": None, "children": []}, 'condition_tree.op: must be "AND" or "OR", got null'),
    ({"op": "AND"}, "condition_tree.children: required in a group (an array, may be empty)"),
    ({"op": "AND", "children": {}}, "condition_tree.children: must be an array, got object"),
    ({"op": "OR", "children": "x"}, "condition_tree.children: must be an array, got string"),
    ({"op": "OR", "children": None}, "condition_tree.children: must be an array, got null"),
    (
        {"op": "AND", "children": [], "field": "body.x"},
        "condition_tree.field: unknown key; a group has only op and children",
    ),
    (
        {"op": "AND", "children": [T, "x"]},
        "condition_tree.children[1]: must be an object, a group {op, children} or a leaf {field, operator, value}, "
        "got string",
    ),
    (
        {"op": "AND", "children": [[T]]},
        "condition_tree.children[0]: must be an object, a group {op, children} or a leaf {field, operator, value}, "
        "got array",
    ),
    # leaves: keys
    (
        {"field": "body.x", "operator": "exists", "negate": True},
        "condition_tree.negate: unknown key; a leaf has only field, operator and value",
    ),
    (
        {"operator": "equals", "value": 1},
        "condition_tree.field: required in a leaf (body.<path>, header.<name> or meta.<key>)",
    ),
    (
        {"field": "body.x", "value": 1},
        "condition_tree.operator: required in a leaf (one of equals, not_equals, contains, exists, regex)",
    ),
    # field
    ({"field": 1, "operator": "exists"}, "condition_tree.field: must be a string, got number"),
    ({"field": None, "operator": "exists"}, "condition_tree.field: must be a string, got null"),
    (
        {"field": "type", "operator": "exists"},
        'condition_tree.field: must be body, body.<path>, header.<name> or meta.<key>, got "type"',
    ),
    (
        {"field": "", "operator": "exists"},
        'condition_tree.field: must be body, body.<path>, header.<name> or meta.<key>, got ""',
    ),
    (
        {"field": "Body.type", "operator": "exists"},
        'condition_tree.field: must be body, body.<path>, header.<name> or meta.<key>, got "Body.type"',
    ),
    (
        {"field": "headers.x", "operator": "exists"},
        'condition_tree.field: must be body, body.<path>, header.<name> or meta.<key>, got "headers.x"',
    ),
    (
        {"field": "header", "operator": "exists"},
        'condition_tree.field: must be body, body.<path>, header.<name> or meta.<key>, got "header"',
    ),
    (
        {"field": "meta", "operator": "exists"},
        'condition_tree.field: must be body, body.<path>, header.<name> or meta.<key>, got "meta"',
    ),
    ({"field": "body.", "operator": "exists"}, 'condition_tree.field: empty path segment in "body."'),
    ({"field": "body..x", "operator": "exists"}, 'condition_tree.field: empty path segment in "body..x"'),
    ({"field": "body.x.", "operator": "exists"}, 'condition_tree.field: empty path segment in "body.x."'),
    ({"field": "header.", "operator": "exists"}, 'condition_tree.field: "" is not a valid header name'),
    ({"field": "header.x y", "operator": "exists"}, 'condition_tree.field: "x y" is not a valid header name'),
    ({"field": "header.x:y", "operator": "exists"}, 'condition_tree.field: "x:y" is not a valid header name'),
    (
        {"field": "meta.labels", "operator": "exists"},
        'condition_tree.field: unknown meta key "labels"; one of provider, event_type, method, path, content_type, '
        "source_ip, signature_valid, ip_allowed, endpoint_id, environment or label.<key>",
    ),
    (
        {"field": "meta.Provider", "operator": "exists"},
        'condition_tree.field: unknown meta key "Provider"; one of provider, event_type, method, path, '
        "content_type, source_ip, signature_valid, ip_allowed, endpoint_id, environment or label.<key>",
    ),
    (
        {"field": "meta.label.a.b", "operator": "exists"},
        'condition_tree.field: "label.a.b" is not a label key (letters, digits, _ and -, at most 64)',
    ),
    (
        {"field": "meta.label.", "operator": "exists"},
        'condition_tree.field: "label." is not a label key (letters, digits, _ and -, at most 64)',
    ),
    ({"field": "body." + "x" * 1000, "operator": "exists"}, "condition_tree.field: longer than 1000 characters"),
    # operator
    ({"field": "body.x", "operator": "gt", "value": 1}, 'condition_tree.operator: unknown operator "gt"'),
    ({"field": "body.x", "operator": "EQUALS", "value": 1}, 'condition_tree.operator: unknown operator "EQUALS"'),
    ({"field": "body.x", "operator": ["equals"], "value": 1}, "condition_tree.operator: must be a string, got array"),
    # value
    ({"field": "body.x", "operator": "equals"}, 'condition_tree.value: required for operator "equals"'),
    ({"field": "body.x", "operator": "not_equals"}, 'condition_tree.value: required for operator "not_equals"'),
    ({"field": "body.x", "operator": "contains"}, 'condition_tree.value: required for operator "contains"'),
    ({"field": "body.x", "operator": "regex"}, 'condition_tree.value: required for operator "regex"'),
    (
        {"field": "body.x", "operator": "exists", "value": True},
        'condition_tree.value: not allowed for operator "exists"',
    ),
    (
        {"field": "body.x", "operator": "exists", "value": None},
        'condition_tree.value: not allowed for operator "exists"',
    ),
    (
        {"field": "body.x", "operator": "equals", "value": {"a": 1}},
        "condition_tree.value: must be a string, number, boolean or null, got object",
    ),
    (
        {"field": "body.x", "operator": "contains", "value": [1]},
        "condition_tree.value: must be a string, number, boolean or null, got array",
    ),
    (
        {"field": "body.x", "operator": "equals", "value": float("inf")},
        "condition_tree.value: must be a finite number",
    ),
    (
        {"field": "body.x", "operator": "regex", "value": 5},
        'condition_tree.value: must be a string (an RE2 pattern) for operator "regex", got number',
    ),
    (
        {"field": "body.x", "operator": "regex", "value": None},
        'condition_tree.value: must be a string (an RE2 pattern) for operator "regex", got null',
    ),
    (
        {"field": "body.x", "operator": "regex", "value": "(a"},
        "condition_tree.value: invalid RE2 pattern: missing ): (a",
    ),
    (
        {"field": "body.x", "operator": "regex", "value": r"(a)\1"},
        r"condition_tree.value: invalid RE2 pattern: invalid escape sequence: \1",
    ),
    (
        {"field": "body.x", "operator": "regex", "value": "(?<=a)b"},
        "condition_tree.value: invalid RE2 pattern: invalid perl operator: (?<=",
    ),
    (
        {"field": "body.x", "operator": "regex", "value": "a" * 1001},
        "condition_tree.value: pattern longer than 1000 characters",
    ),
    # paths into nested groups
    (
        group("AND", T, group("OR", T, T, leaf("body.x", "equals"))),
        'condition_tree.children[1].children[2].value: required for operator "equals"',
    ),
    (
        group("AND", T, leaf("body.x", "gt", 1)),
        'condition_tree.children[1].operator: unknown operator "gt"',
    ),
    (
        group("OR", group("AND", T, T, {"field": "body.x", "operator": "equals", "value": 1, "x": 2})),
        "condition_tree.children[0].children[2].x: unknown key; a leaf has only field, operator and value",
    ),
    (
        group("OR", group("AND", {"op": "XOR", "children": []})),
        'condition_tree.children[0].children[0].op: must be "AND" or "OR", got "XOR"',
    ),
    (
        group("OR", group("AND", leaf("header.bad name", "exists"))),
        'condition_tree.children[0].children[0].field: "bad name" is not a valid header name',
    ),
]


@pytest.mark.parametrize(("tree", "message"), INVALID)
def test_invalid_trees_are_refused_naming_the_path(tree, message):
    with pytest.raises(InvalidConditionTree) as caught:
        validate(tree)
    assert caught.value.message == message
    assert str(caught.value) == message
    assert caught.value.code == "invalid_condition_tree"
    assert status_of(caught.value) == 400
    assert isinstance(caught.value, ValidationError)


def test_the_depth_limit_is_exact():
    validate(nest(MAX_DEPTH, T))
    path = "condition_tree" + ".children[0]" * MAX_DEPTH
    with pytest.raises(InvalidConditionTree) as caught:
        validate(nest(MAX_DEPTH + 1, T))
    assert caught.value.message == f"{path}: nested deeper than {MAX_DEPTH} levels"
    validate(nest(MAX_DEPTH, group("AND")))
    with pytest.raises(InvalidConditionTree):
        validate(nest(MAX_DEPTH + 1, group("AND")))


def test_a_very_deep_tree_is_refused_without_recursing_through_it():
    tree: Any = T
    for _ in range(100_000):
        tree = {"op": "AND", "children": [tree]}
    with pytest.raises(InvalidConditionTree, match="nested deeper than 32 levels"):
        validate(tree)


def test_the_node_limit_is_exact():
    validate(group("OR", *[T] * (MAX_NODES - 1)))
    with pytest.raises(InvalidConditionTree) as caught:
        validate(group("OR", *[T] * MAX_NODES))
    assert caught.value.message == f"condition_tree.children[{MAX_NODES - 1}]: the tree has more than 256 nodes"


def test_the_encoded_size_is_bounded():
    big = "x" * (conditions.MAX_ENCODED_BYTES // 2)
    validate(leaf("body.a", "equals", big))
    with pytest.raises(InvalidConditionTree) as caught:
        validate(group("OR", leaf("body.a", "equals", big), leaf("body.b", "equals", big)))
    assert caught.value.message.startswith("condition_tree: larger than 65536 bytes as JSON (")


@pytest.mark.parametrize("operator", ["equals", "not_equals", "contains", "regex"])
def test_text_jsonb_cannot_hold_is_refused_naming_the_node(operator):
    """A tree is stored as jsonb, which holds neither NUL nor (as UTF-8) a lone surrogate: refused, not a 500."""
    surrogate = r"^condition_tree.value: must not contain lone UTF-16 surrogates"
    with pytest.raises(InvalidConditionTree, match=surrogate):
        validate(leaf("body.a", operator, "\ud800"))
    with pytest.raises(InvalidConditionTree, match=r"^condition_tree.value: must not contain NUL characters$"):
        validate(leaf("body.a", operator, "a\x00b"))
    nested = group("AND", leaf("body.a", "exists"), leaf("header.x", operator, "\x00"))
    with pytest.raises(InvalidConditionTree, match=r"^condition_tree.children\[1\].value: must not contain NUL"):
        validate(nested)


@pytest.mark.parametrize("field", ["body.a\x00", "body.\x00", "body.\udc00", "header.\x00"])
def test_a_field_jsonb_cannot_hold_is_refused(field):
    with pytest.raises(InvalidConditionTree, match=r"^condition_tree.field: must not contain"):
        validate(leaf(field, "exists"))


def test_the_path_prefix_can_be_chosen():
    with pytest.raises(InvalidConditionTree) as caught:
        validate(group("AND", leaf("body.x", "gt", 1)), path="rule.tree")
    assert caught.value.message == 'rule.tree.children[0].operator: unknown operator "gt"'


@pytest.mark.parametrize(
    ("tree", "normalised"),
    [
        (leaf("header.X-Shop-Topic", "equals", "a"), leaf("header.x-shop-topic", "equals", "a")),
        ({"value": 1, "operator": "equals", "field": "body.a"}, leaf("body.a", "equals", 1)),
        ({"children": [], "op": "OR"}, group("OR")),
        (
            group("AND", leaf("header.A", "exists"), group("OR", leaf("meta.provider", "equals", None))),
            group("AND", leaf("header.a", "exists"), group("OR", leaf("meta.provider", "equals", None))),
        ),
        (leaf("body", "regex", "^x"), leaf("body", "regex", "^x")),
        (leaf("body.a.0.b", "contains", 1.5), leaf("body.a.0.b", "contains", 1.5)),
    ],
)
def test_validate_returns_the_normalised_tree(tree, normalised):
    original = copy.deepcopy(tree)
    result = validate(tree)
    assert result == normalised
    assert list(result) == list(normalised)  # keys in a fixed order
    assert tree == original  # the input is not changed
    assert validate(result) == result


# -- compilation ----------------------------------------------------------------------------------------


def test_compiled_trees_are_cached_by_their_canonical_json():
    tree = group("AND", leaf("body.type", "equals", "invoice.paid"), leaf("header.x-count", "regex", "^5$"))
    first = compile_tree(tree)
    assert compile_tree(copy.deepcopy(tree)) is first
    assert compile_tree({"children": tree["children"], "op": "AND"}) is first
    assert compile_tree(group("OR", *tree["children"])) is not first
    assert first(EVENT) is True
    assert matches(tree, EVENT) is True


def test_compile_tree_refuses_a_tree_that_is_not_valid():
    with pytest.raises(InvalidConditionTree, match='operator: unknown operator "gt"'):
        compile_tree(leaf("body.x", "gt", 1))
    with pytest.raises(InvalidConditionTree):
        compile_tree({"op": "AND", "children": [object()]})


def test_compile_tree_normalises_header_names_itself():
    assert compile_tree(leaf("header.X-Shop-Topic", "equals", "orders/create"))(EVENT) is True


def test_missing_sentinel():
    assert repr(MISSING) == "MISSING"
    assert not MISSING
    assert type(MISSING)() is MISSING
    assert EventView().body is MISSING


def test_event_view_is_frozen():
    with pytest.raises(AttributeError):
        EVENT.body = {}  # type: ignore[misc]


# -- RE2: linear time on hostile patterns ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("(a+)+$", "a" * 100_000 + "b"),
        ("(a|aa)+$", "a" * 100_000 + "b"),
        ("(x+x+)+y", "x" * 100_000),
        ("^(([a-z])+.)+[A-Z]([a-z])+$", "a" * 100_000 + "!"),
        ("(.*a){20}", "a" * 19 + "b" * 100_000),
    ],
)
def test_hostile_patterns_run_in_linear_time(pattern, text):
    predicate = compile_tree(validate(leaf("body.s", "regex", pattern)))
    event = EventView(body={"s": text})
    start = time.perf_counter()
    for _ in range(10):
        assert predicate(event) is False
    assert time.perf_counter() - start < 1.0


def test_regex_searches_lone_surrogates_without_raising():
    predicate = compile_tree(leaf("body.s", "regex", "x"))
    assert predicate(EventView(body={"s": "\ud800x"})) is True
    assert predicate(EventView(body={"s": ["\udfff"]})) is False


# -- properties ---------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_validate_raises_nothing_but_invalid_condition_tree_on_any_json(value):
    try:
        result = validate(value)
    except InvalidConditionTree as exc:
        error: InvalidConditionTree | None = exc
    else:
        error = None
        assert validate(result) == result
    if error is not None:
        assert error.message.startswith("condition_tree")
        assert error.code == "invalid_condition_tree"


KEYS = ["a", "b", "0", "1", "type"]
VALID_FIELDS = st.one_of(
    st.just("body"),
    st.lists(st.sampled_from(KEYS), min_size=1, max_size=3).map(lambda p: "body." + ".".join(p)),
    st.sampled_from(["header.x-a", "header.X-B", "header.content-type"]),
    st.sampled_from([f"meta.{k}" for k in META_KEYS]),
)
INVALID_FIELDS = st.sampled_from(["body..a", "header.", "meta.nope", "nope", ""])


def mostly(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` 19 times in 20: a tree with a dozen nodes should often be valid as a whole."""
    return st.integers(0, 19).flatmap(lambda n: invalid if n == 0 else valid)


PATTERNS = ["^a", "b$", "[0-9]+", "(?i)X", "a|b", "^$", "null", "true", "(a", "(?<=a)b"]
VALUES = st.one_of(scalars, st.sampled_from(["a", "b", "1", "0", "true", "null", "2.5"]))


@st.composite
def leaves(draw: st.DrawFn) -> dict[str, Any]:
    operator = draw(mostly(st.sampled_from(OPERATORS), st.just("gt")))
    if operator == "regex":
        value = draw(mostly(st.sampled_from(PATTERNS), VALUES))
    elif operator == "exists":
        value = draw(mostly(st.just(NO_VALUE), VALUES))
    else:
        value = draw(mostly(VALUES, st.just(NO_VALUE)))
    return leaf(draw(mostly(VALID_FIELDS, INVALID_FIELDS)), operator, value)


trees = st.recursive(
    leaves(),
    lambda children: st.builds(
        lambda op, kids: {"op": op, "children": kids},
        mostly(st.sampled_from(["AND", "OR"]), st.just("and")),
        st.lists(children, max_size=4),
    ),
    max_leaves=12,
)
event_bodies = st.one_of(
    st.just(MISSING),
    json_values,
    st.recursive(
        scalars,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(KEYS), c, max_size=4),
        max_leaves=15,
    ),
)
events = st.builds(
    EventView,
    body=event_bodies,
    headers=st.dictionaries(st.sampled_from(["x-a", "x-b", "content-type"]), st.text(max_size=10), max_size=3),
    meta=st.dictionaries(st.sampled_from(META_KEYS), scalars, max_size=10),
)


def reference_get(name: str, event: EventView) -> Any:
    if name.startswith("header."):
        return event.headers.get(name[len("header.") :].lower(), MISSING)
    if name.startswith("meta."):
        value = event.meta.get(name[len("meta.") :])
        return MISSING if value is None else value
    value = event.body
    for segment in name.split(".")[1:]:
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return MISSING
    return value


def reference_equals(actual: Any, value: Any) -> bool:
    if actual is MISSING:
        return False
    numeric_value = value if type(value) in (int, float) else None
    if isinstance(value, str) and re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", value):
        numeric_value = float(value) if any(c in value for c in ".eE") else int(value)
    if type(actual) in (int, float) and numeric_value is not None:
        return actual == numeric_value
    return text_form(actual) == text_form(value)


def reference(node: dict[str, Any], event: EventView) -> bool:
    """A naive interpreter of the documented semantics, the oracle for the compiled closures."""
    if "op" in node:
        results = [reference(child, event) for child in node["children"]]
        return all(results) if node["op"] == "AND" else any(results)
    actual = reference_get(node["field"], event)
    operator, value = node["operator"], node.get("value")
    if operator == "not_equals":
        return not reference_equals(actual, value)
    if actual is MISSING:
        return False
    if operator == "exists":
        return True
    if operator == "equals":
        return reference_equals(actual, value)
    if operator == "contains":
        if isinstance(actual, list):
            return any(reference_equals(item, value) for item in actual)
        if isinstance(actual, dict):
            return text_form(value) in actual
        return text_form(value) in text_form(actual)
    # RE2's $ (without the m flag) matches only at the very end; Python's also before a final newline
    return re.search(value.replace("$", r"\Z"), text_form(actual)) is not None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees, st.lists(events, min_size=1, max_size=5))
def test_every_accepted_tree_compiles_and_evaluates_like_the_reference(tree, sample):
    try:
        normalised = validate(tree)
    except InvalidConditionTree:
        return
    predicate = compile_tree(normalised)
    for event in sample:
        result = predicate(event)
        assert type(result) is bool
        assert result is reference(normalised, event)


@settings(max_examples=100, deadline=None)
@given(events)
def test_not_equals_is_exactly_the_negation_of_equals(event):
    for name in ["body", "body.a", "body.a.0", "header.x-a", "meta.provider", "meta.signature_valid"]:
        for value in ["a", 1, "1", True, None, "null", 2.5]:
            eq = compile_tree(leaf(name, "equals", value))(event)
            ne = compile_tree(leaf(name, "not_equals", value))(event)
            assert eq is not ne


@pytest.mark.parametrize(
    ("tree", "always"),
    [
        (group("AND"), True),
        (group("OR", group("AND")), True),
        (group("AND", group("AND"), group("OR", group("AND"), F)), True),
        (group("OR", F, group("AND"), T), True),
        (nest(MAX_DEPTH, group("AND")), True),
        (group("AND", T), False),
        (group("AND", group("AND"), T), False),
        (group("OR"), False),
        (group("AND", group("OR")), False),
        (group("AND", T, group("OR", group("OR"))), False),
    ],
)
def test_trees_matching_every_event_compile_to_always(tree, always):
    """The flush routes with a tree compiled to ALWAYS without building the event's view, so folding the
    constant groups must never change a result."""
    normalised = validate(tree)
    predicate = compile_tree(normalised)
    assert (predicate is conditions.ALWAYS) is always
    for event in (EVENT, EventView(), EventView(body=MISSING, headers={}, meta={})):
        assert predicate(event) is reference(normalised, event)
