"""The learner's per-sender caches are bounded in bytes: a hostile account cannot make a worker's memory
grow, and another account's sender beside it still learns exactly what it sent (issue 42).

The hostile account's every endpoint sends a new shape of hundreds of nested paths twice in a row, which
makes each one a Struct (a class per object) that the learner would keep per shape and per sender. The
bounds are made small here so that a few hundred such senders pass them many times over; what the learner
holds is measured with tracemalloc, not taken from its own accounting. No servers: the learner's CPU part.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from control.schemas import learn as learn_module
from control.schemas import shape as shape_module
from control.schemas.learn import Learner
from tests.schemas.test_schema_typed import _charge, _general, _row, _view

_BOUND = 2 * 1024 * 1024
_NORMAL = ("ep_normal", "payments", "charge.succeeded")


def _hostile(n: int) -> bytes:
    """A shape of its own: 150 objects of two fields (450 paths), under keys no other body has."""
    return json.dumps({f"h{n}_{k}": {"a": k, "b": "x"} for k in range(150)}).encode()


def _normal_batch(start: int) -> list[tuple]:
    return [_row(i, json.dumps(_charge(i)).encode(), endpoint=_NORMAL[0]) for i in range(start, start + 20)]


def _check_normal(learner: Learner, start: int) -> None:
    rows = _normal_batch(start)
    (batch,) = learner.read(rows).values()
    assert _view(batch) == _view(_general([row[3] for row in rows]))
    assert learner._typed.get(_NORMAL) is not None, "the normal sender's Struct is kept or built again"


def test_a_hostile_account_filling_the_struct_caches_stays_within_their_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(learn_module, "_MAX_TYPED_BYTES", _BOUND)
    monkeypatch.setattr(learn_module, "_MAX_LAST_BYTES", _BOUND // 2)
    monkeypatch.setattr(shape_module, "_MAX_CACHED_BYTES", _BOUND)
    for name in ("max_bytes", "max_entry"):
        monkeypatch.setattr(shape_module._fragments, name, _BOUND)
    shape_module._fragments.clear()
    learner = Learner()
    _check_normal(learner, 0)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for rounds in range(4):
            # 25 endpoints of the hostile account, each showing its own shape twice: 25 new Structs.
            hostile = [_row(i, _hostile(rounds * 25 + i), endpoint=f"ep_h{rounds * 25 + i}") for i in range(25)]
            learner.read([row for row in hostile for _ in range(2)])
            assert learner._structs.nbytes <= _BOUND
            assert learner._typed.nbytes <= _BOUND
            assert learner._last.nbytes <= _BOUND // 2
            assert shape_module._fragments.nbytes <= _BOUND
            _check_normal(learner, 100 * (rounds + 1))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 100 hostile Structs of ~650 KB each were built (65 MB, all kept when the caches counted entries); what
    # stays is within the caches' bounds (shapes, fragments, Structs by shape and by sender, last shapes,
    # together 4.5 bounds): their weights are honest, not only bounded.
    assert len(learner._typed) < 100
    assert held < 4.5 * _BOUND, f"the learner holds {held} bytes after the flood"
