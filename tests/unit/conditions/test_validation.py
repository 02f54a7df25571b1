"""Condition trees validated (control.routing.conditions.validation): refusals naming the exact path,
the depth, node and size limits, and the normalised tree validate returns."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from control.api.errors import status_of
from control.routing import conditions
from control.routing.conditions import MAX_DEPTH, MAX_NODES, InvalidConditionTree, validate
from shared.errors import ValidationError
from tests.unit.conditions.support import T, group, leaf, nest

INVALID = [
    # root
    ([], "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got []"),
    ("AND", 'condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got "AND"'),
    (None, "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got null"),
    (3, "condition_tree: must be an object, a group {op, children} or a leaf {field, operator, value}, got 3"),
    ({}, "condition_tree: empty object; expected a group {op, children} or a leaf {field, operator, value}"),
    (
        {"kind": "x"},
        "condition_tree.kind: unknown key; a group has op and children, a leaf field, operator and value",
    ),
    # groups
    ({"children": []}, 'condition_tree.op: required in a group ("AND" or "OR")'),
    ({"op": "and", "children": []}, 'condition_tree.op: must be "AND" or "OR", got "and"'),
    ({"op": "NOT", "children": []}, 'condition_tree.op: must be "AND" or "OR", got "NOT"'),
    ({"op": 1, "children": []}, 'condition_tree.op: must be "AND" or "OR", got 1'),
    ({"op": None, "children": []}, 'condition_tree.op: must be "AND" or "OR", got null'),
    ({"op": "AND"}, "condition_tree.children: required in a group (an array, may be empty)"),
    ({"op": "AND", "children": {}}, "condition_tree.children: must be an array, got {}"),
    ({"op": "OR", "children": "x"}, 'condition_tree.children: must be an array, got "x"'),
    ({"op": "OR", "children": None}, "condition_tree.children: must be an array, got null"),
    (
        {"op": "AND", "children": [], "field": "body.x"},
        "condition_tree.field: unknown key; a group has only op and children",
    ),
    (
        {"op": "AND", "children": [T, "x"]},
        "condition_tree.children[1]: must be an object, a group {op, children} or a leaf {field, operator, value}, "
        'got "x"',
    ),
    (
        {"op": "AND", "children": [[T]]},
        "condition_tree.children[0]: must be an object, a group {op, children} or a leaf {field, operator, value}, "
        "got a JSON array",
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
    ({"field": 1, "operator": "exists"}, "condition_tree.field: must be a string, got 1"),
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
    (
        {"field": "body.x", "operator": "gt", "value": 1},
        'condition_tree.operator: unknown operator "gt"; one of equals, not_equals, contains, exists, regex',
    ),
    (
        {"field": "body.x", "operator": "EQUALS", "value": 1},
        'condition_tree.operator: unknown operator "EQUALS"; one of equals, not_equals, contains, exists, regex',
    ),
    (
        {"field": "body.x", "operator": ["equals"], "value": 1},
        'condition_tree.operator: must be a string, got ["equals"]',
    ),
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
        'condition_tree.value: must be a string, number, boolean or null, got {"a":1}',
    ),
    (
        {"field": "body.x", "operator": "contains", "value": [1]},
        "condition_tree.value: must be a string, number, boolean or null, got [1]",
    ),
    (
        {"field": "body.x", "operator": "equals", "value": float("inf")},
        "condition_tree.value: must be a finite number",
    ),
    (
        {"field": "body.x", "operator": "regex", "value": 5},
        'condition_tree.value: must be a string (an RE2 pattern) for operator "regex", got 5',
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
        'condition_tree.children[1].operator: unknown operator "gt"; '
        "one of equals, not_equals, contains, exists, regex",
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
    assert (
        caught.value.message == 'rule.tree.children[0].operator: unknown operator "gt"; '
        "one of equals, not_equals, contains, exists, regex"
    )


@pytest.mark.parametrize(
    ("tree", "normalised"),
    [
        (leaf("header.X-Shop-Topic", "equals", "a"), leaf("header.x-shop-topic", "equals", "a")),
        ({"value": 1, "operator": "equals", "field": "body.a"}, leaf("body.a", "equals", 1)),
        ({"children": [], "op": "OR"}, group("OR")),
        (
            group("AND", leaf("header.A", "exists"), group("OR", leaf("meta.event_type", "equals", None))),
            group("AND", leaf("header.a", "exists"), group("OR", leaf("meta.event_type", "equals", None))),
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
