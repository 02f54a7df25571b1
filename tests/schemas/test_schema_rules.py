"""The version rule and the diff's classification, on the learner's own state (no servers needed): each
change kind with its breaking flag, a field becoming required only after its recent window, paths that
round-trip through their escapes."""

from __future__ import annotations

from typing import Any

import pytest

from control.schemas.diff import diff
from control.schemas.shape import Shapes, join_key, split_path
from control.schemas.state import WARMUP, WINDOW, Batch, State, fields, hash_value, hash_values, merge, next_version


def _field(path: str, types: list[str], optional: bool = False) -> dict[str, Any]:
    return {"path": path, "types": types, "optional": optional, "nullable": "null" in types, "presence": 1.0}


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ([], [_field("a", ["string"])], [("a", "added", False)]),
        ([_field("a", ["string"])], [], [("a", "removed", True)]),
        ([_field("a", ["integer"])], [_field("a", ["string"])], [("a", "type_changed", True)]),
        ([_field("a", ["string"])], [_field("a", ["null", "string"])], [("a", "became_nullable", True)]),
        ([_field("a", ["string"], optional=True)], [_field("a", ["string"])], [("a", "became_required", False)]),
        ([_field("a", ["string"])], [_field("a", ["string"], optional=True)], [("a", "type_changed", True)]),
        ([_field("a", ["string"])], [_field("a", ["string"])], []),
    ],
)
def test_each_change_kind_and_its_breaking_flag(
    before: list[dict[str, Any]], after: list[dict[str, Any]], expected: list[tuple[str, str, bool]]
) -> None:
    changes = diff(before, after)
    assert [(c["path"], c["change"], c["breaking"]) for c in changes] == expected
    for c in changes:
        assert c["before"] == next((f for f in before if f["path"] == c["path"]), None)
        assert c["after"] == next((f for f in after if f["path"] == c["path"]), None)


def _learn(state: State, shapes: Shapes, docs: list[dict[str, Any]]) -> tuple[int, bool] | None:
    batch = Batch()
    for doc in docs:
        shape = shapes.of(doc)
        batch.count += 1
        batch.shapes[shape] = batch.shapes.get(shape, 0) + 1
    start = state.total + 1
    return next_version(state, start, merge(state, batch))


def test_a_field_becomes_required_only_after_its_recent_window() -> None:
    state, shapes = State(), Shapes()
    assert _learn(state, shapes, [{"a": 1, "x": 1}, {"a": 1}] * (WARMUP // 2 + 10)) == (1, True)
    assert {f["path"]: f["optional"] for f in fields(state)} == {"a": False, "x": True}
    for _ in range(WINDOW // 100 - 1):  # present in each of the next WINDOW - 100 samples: still optional
        assert _learn(state, shapes, [{"a": 1, "x": 1}] * 100) is None
    assert _learn(state, shapes, [{"a": 1, "x": 1}] * 100) == (2, True)
    assert {f["path"]: f["optional"] for f in fields(state)} == {"a": False, "x": False}
    # Stable traffic from here on: no version.
    for _ in range(5):
        assert _learn(state, shapes, [{"a": 2, "x": 3}] * 500) is None


def test_warm_up_amends_version_one() -> None:
    state, shapes = State(), Shapes()
    assert _learn(state, shapes, [{"a": 1}]) == (1, True)
    assert _learn(state, shapes, [{"a": 1, "b": None}]) == (1, False)
    # A type change is no question of evidence: it cuts a version at once, in the warm-up too (issue 26).
    assert _learn(state, shapes, [{"a": 1.5}] * WARMUP) == (2, True)
    assert [(f["path"], f["types"], f["optional"]) for f in fields(state)] == [
        ("a", ["number"], False),
        ("b", ["null"], True),
    ]
    assert _learn(state, shapes, [{"a": "x"}]) == (3, True)


@pytest.mark.parametrize("key", ["plain", "a.b", "back\\slash", "x[]", "[0]", "tail\\"])
def test_paths_round_trip_through_their_escapes(key: str) -> None:
    path = join_key(join_key("top", key), "leaf") + "[]"
    assert split_path(path) == [("top", 0), (key, 0), ("leaf", 1)]


def test_hash_values_is_hash_value_of_each() -> None:
    """The batch hasher (strings in one pass) gives every value's own hash: integers and lone surrogates too,
    from any iterable (a one-pass one included)."""
    values = ["cus_1", "évt", 42, "\ud800x"]
    assert hash_values(values) == [hash_value(v) for v in values]
    assert hash_values(iter(values)) == [hash_value(v) for v in values]
    assert hash_values({"cus_1", "évt"}) == [hash_value(v) for v in {"cus_1", "évt"}]
