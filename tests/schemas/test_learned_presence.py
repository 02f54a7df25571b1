"""Presence and ``optional`` relative to the parent, on real payloads and on bodies made to hit the bounds
(issue 26): no per-body cap below what real providers send, a body cut by a bound is no evidence that a field
is absent, and a field first seen late was missing only from the samples that had its parent.

Learned here with the learner's own pieces (compiled shapes, batches, the merge), sample by sample as the
flush would in the worst case, and compared with a plain reference count (``tests.schemas.real.expected``)."""

from __future__ import annotations

from typing import Any

import pytest

from control.schemas.shape import MAX_PATHS, Shapes
from control.schemas.state import Batch, State, fields, merge, next_version
from tests.schemas.real import by_event_type, expected


def learn(docs: list[dict[str, Any]], state: State | None = None, per_batch: int = 1) -> State:
    state, shapes = state or State(), Shapes()
    for i in range(0, len(docs), per_batch):
        batch = Batch()
        for doc in docs[i : i + per_batch]:
            batch.add(shapes.of(doc), 1, None)
            batch.count += 1
        start = state.total + 1
        next_version(state, start, merge(state, batch))
    return state


@pytest.mark.parametrize("per_batch", [1, 7])
def test_every_real_field_is_learned_with_presence_relative_to_its_parent(per_batch: int) -> None:
    """All 58 event types of the provider's published examples: every path of every payload is a field, with
    the types, the ``optional`` flag and the presence a plain count of the payloads gives."""
    wrong: list[tuple[str, str, Any, Any]] = []
    fields_seen = 0
    for event_type, payloads in by_event_type().items():
        learned = {f["path"]: f for f in fields(learn(payloads, per_batch=per_batch))}
        reference = expected(payloads)
        assert set(learned) == set(reference.present), event_type
        for path, f in learned.items():
            want = reference.field(path)
            got = {"types": f["types"], "optional": f["optional"], "presence": f["presence"]}
            if got != want:
                wrong.append((event_type, path, got, want))
        fields_seen += len(learned)
    assert not wrong, f"{len(wrong)} of {fields_seen} fields differ, first: {wrong[:3]}"
    assert fields_seen > 10_000


def test_the_largest_real_payloads_are_learned_whole() -> None:
    """The review events GitHub Apps receive carry more paths than the old 500-path cap: every field the
    payloads of one event type all have is learned, required, present in all of them."""
    for event_type in ("pull_request_review", "pull_request_review_comment", "pull_request_review_thread"):
        payloads = by_event_type()[event_type]
        reference = expected(payloads)
        assert max(len(expected([p]).present) for p in payloads) > 500
        learned = {f["path"]: f for f in fields(learn(payloads))}
        everywhere = [path for path, n in reference.present.items() if n == len(payloads)]
        assert {"sender.type", "repository.owner.login", "sender.login"} <= set(everywhere), event_type
        assert "installation" in learned
        for path in everywhere:
            assert (learned[path]["optional"], learned[path]["presence"]) == (False, 1.0), (event_type, path)


def test_a_body_cut_by_the_path_bound_is_no_evidence_of_absence() -> None:
    """A hostile body (a map keyed by data) is learned up to ``MAX_PATHS``; where it was cut (the keys after
    the map, the map's own tail) nothing counts as absent, before or after."""
    hostile = {"a": 1, "map": {f"k{i}": i for i in range(MAX_PATHS + 500)}, "z": "after the cut"}
    state = learn([{"a": 1, "z": "x"}] * 3 + [hostile] + [{"a": 2, "z": "y"}] * 3)
    learned = {f["path"]: f for f in fields(state)}
    assert learned["z"]["optional"] is False
    assert learned["z"]["presence"] == 1.0  # 6 of the 6 samples that looked at the body's keys
    assert learned["a"]["presence"] == 1.0
    assert learned["map"]["optional"] is True  # absent from 6 bodies that were looked at whole
    assert len(state.paths) == MAX_PATHS

    # The cut body first: it fills the schema (a body holds what its schema can), and what came before the cut
    # is learned as seen, required, present in every sample that looked.
    state = learn([hostile] + [{"a": 1, "z": "x"}] * 2)
    learned = {f["path"]: f for f in fields(state)}
    assert len(state.paths) == MAX_PATHS
    assert "z" not in learned
    assert (learned["a"]["optional"], learned["a"]["presence"]) == (False, 1.0)


def test_a_late_field_is_missed_only_where_its_parent_was() -> None:
    plain = {"action": "opened", "issue": {"id": 1}}
    edited_title = {"action": "edited", "issue": {"id": 1}, "changes": {"title": {"from": "a"}}}
    edited_both = {**edited_title, "changes": {"title": {"from": "a"}, "body": {"from": "b"}}}
    state = learn([plain] * 10 + [edited_title] * 5 + [edited_both] * 5)
    learned = {f["path"]: (f["optional"], f["presence"]) for f in fields(state)}
    assert learned["changes"] == (True, 0.5)  # 10 of 20 bodies
    assert learned["changes.title"] == (False, 1.0)  # every `changes` has it
    assert learned["changes.title.from"] == (False, 1.0)
    assert learned["changes.body"] == (True, 0.5)  # 5 of the 10 `changes`
    assert learned["changes.body.from"] == (False, 1.0)  # every `changes.body` has it
