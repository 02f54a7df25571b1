"""Condition trees compiled (control.routing.conditions.compilation): groups, nesting to the depth limit,
wide trees, the compile cache, and RE2's linear time on hostile patterns."""

from __future__ import annotations

import copy
import time

import pytest

from control.routing.conditions import (
    MAX_DEPTH,
    MAX_NODES,
    MISSING,
    EventView,
    InvalidConditionTree,
    compile_tree,
    matches,
    validate,
)
from tests.unit.conditions.support import EVENT, F, T, check, group, leaf, nest


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
