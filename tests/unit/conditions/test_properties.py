"""Condition trees: properties over arbitrary JSON and events (hypothesis): validate raises only
InvalidConditionTree, accepted trees evaluate like a reference, and trees matching every event compile to always."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.routing import conditions
from control.routing.conditions import (
    MAX_DEPTH,
    META_KEYS,
    MISSING,
    OPERATORS,
    EventView,
    InvalidConditionTree,
    compile_tree,
    text_form,
    validate,
)
from tests.unit.conditions.support import EVENT, NO_VALUE, F, T, group, leaf, nest

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
