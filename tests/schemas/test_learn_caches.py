"""The learner's per-sender caches are bounded in bytes: a hostile account cannot make a worker's memory
grow, and another account's sender beside it still learns exactly what it sent (issue 42).

The hostile account's every endpoint sends a new shape of hundreds of nested paths twice in a row, which
makes each one a Struct (a class per object) that the learner would keep per shape and per sender. The
bounds are made small here so that a few hundred such senders pass them many times over; what the learner
holds is measured with tracemalloc, not taken from its own accounting. No servers: the learner's CPU part,
but for the id maps (endpoint → account, scope → schema id), which the learner fills from Postgres.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from control.db.context import Context
from control.schemas import learn as learn_module
from control.schemas import shape as shape_module
from control.schemas.learn import Learner
from control.service import schemas as service
from tests.conftest import make_account
from tests.schemas.support import flush, make_endpoint, principal, record
from tests.schemas.test_schema_typed import _charge, _general, _row, _view

_BOUND = 1024 * 1024
_NORMAL = ("ep_normal", "payments", "charge.succeeded")


def _hostile(n: int) -> bytes:
    """A shape of its own: 50 objects of two fields (150 paths), under keys no other body has. A third of the
    paths it had: each Struct is still a sixth of a bound, and the test 2.4 s instead of 6 s alone (47 s in a
    loaded suite run)."""
    return json.dumps({f"h{n}_{k}": {"a": k, "b": "x"} for k in range(50)}).encode()


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
    # 100 hostile Structs of ~180 KB each were built (18 MB, all kept when the caches counted entries); what
    # stays is within the caches' bounds (shapes, fragments, Structs by shape and by sender, last shapes,
    # together 4.5 bounds): their weights are honest, not only bounded.
    assert len(learner._typed) < 100
    assert held < 4.5 * _BOUND, f"the learner holds {held} bytes after the flood"


def test_the_shapes_cache_lets_go_of_the_least_recently_used_shapes_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Full, the shapes cache drops the shapes used longest ago, not all of them: a sender whose shape is
    used all the time keeps it (the same compiled Shape) while a flood of new shapes passes through; it once
    emptied at once, and every sender's shape was compiled again."""
    monkeypatch.setattr(shape_module, "_MAX_CACHED_BYTES", _BOUND)
    shapes = shape_module.Shapes()
    normal = shapes.of(_charge(0))
    sizes = []
    for n in range(100):  # 100 shapes of 150 paths: about 4 bounds' worth at their weight
        shapes.of(json.loads(_hostile(n)))
        assert shapes.nbytes <= _BOUND
        sizes.append(len(shapes._cache))
        assert shapes.of(_charge(n)) is normal, "the shape in use was dropped"
    assert sizes[-1] < 100  # it was full, and let shapes go...
    assert min(sizes[len(sizes) // 2 :]) >= sizes[-1] - 1  # ...one at a time, never all at once
    assert shapes.nbytes > _BOUND // 2
    assert shapes.of(json.loads(_hostile(99))) is shapes.of(json.loads(_hostile(99)))  # the newest are kept
    assert shape_module.signature(json.loads(_hostile(0))) not in shapes._cache  # the oldest are not


async def test_the_learners_id_maps_stay_within_their_bytes_beside_a_hostile_account(
    ctx: Context, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learner's endpoint → account and (account, scope) → schema maps are bounded in bytes (once 50,000
    entries each of any length, emptied at once when full): a hostile account's many endpoints and long
    event types (a scope key holds the event type) pass through them, and another account's sender beside
    it still has every event learned in its own schema."""
    bound = 32 * 1024
    monkeypatch.setattr(learn_module, "_MAX_IDS_BYTES", bound)
    learner = Learner()
    normal = await make_account(database_url)
    normal_endpoint = await make_endpoint(database_url, normal.id)
    hostile = await make_account(database_url)
    hostile_endpoints = [await make_endpoint(database_url, hostile.id) for _ in range(30)]
    sent = 0
    for round_ in range(5):
        flood = [
            record(endpoint, {"type": f"{round_}.{k}." + "t" * 1000, "n": 1})
            for k, endpoint in enumerate(hostile_endpoints)
        ]
        await flush(ctx, flood, learner)
        await flush(
            ctx, [record(normal_endpoint, {"type": "charge.succeeded", "amount": i}) for i in range(5)], learner
        )
        sent += 5
        assert learner._ids.nbytes <= bound
        assert learner._accounts.nbytes <= bound
        (schema,) = (await service.list_schemas(ctx, principal(normal.id))).schemas
        assert schema.sample_count == sent
    hostile_schemas = (await service.list_schemas(ctx, principal(hostile.id))).schemas
    assert len(hostile_schemas) == 150  # every one learned, through maps that hold a fraction of them
    assert len(learner._ids) < 60
