"""The learner's Struct fast path (``control.schemas.typed``) learns exactly what the general path learns.

A sender's repeated shape is decoded straight into a msgspec Struct; everything else takes the general path
(decode to dicts, walk the signature). These tests feed the real Learner batches of a mix of bodies that a
Struct must refuse (a key more or less, another type, null, a float where an integer was, items that differ
past the first 32, duplicate keys, keys in another order, no JSON at all) and compare the merged state with
the one the general path alone gives, body by body. No servers: the learner's gathering and merging only.
"""

from __future__ import annotations

import datetime
import json
import random
from collections import Counter
from typing import Any

import msgspec
import pytest

from control.db.learn_queue import LEARN_COLUMNS
from control.schemas.learn import Learner
from control.schemas.shape import Shapes
from control.schemas.state import Batch, State, fields, merge
from control.schemas.typed import typed

_NOW = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)


def _row(i: int, body: bytes, endpoint: str = "ep_1", event_type: str = "charge.succeeded") -> tuple:
    values: dict[str, Any] = {
        "id": f"evt_{i}",
        "endpoint_id": endpoint,
        "received_at": _NOW + datetime.timedelta(microseconds=i),
        "body": body,
        "provider": "payments",
        "event_type": event_type,
        "signature_valid": True,
        "ip_allowed": None,
    }
    return tuple(values.get(c) for c in LEARN_COLUMNS)


def _charge(i: int) -> dict[str, Any]:
    return {
        "id": f"evt_{i}",
        "type": "charge.succeeded",
        "created": 1_700_000_000 + i,
        "livemode": False,
        "data": {
            "object": {
                "id": f"ch_{i}",
                "amount": 100 + i,
                "customer": f"cus_{i % 7}",
                "billing": {"email": f"u{i}@example.com", "phone": None},
                "refunds": [],
                "lines": [{"sku": f"s{k}", "qty": k} for k in range(3)],
            }
        },
    }


def _variant(i: int, rng: random.Random) -> bytes:
    """Mostly the stable shape; often one of the differences a Struct must refuse (or, for key order and an
    integer where a number was, may accept without changing what is learned)."""
    doc = _charge(i)
    obj = doc["data"]["object"]
    kind = rng.choice(["same"] * 6 + list(range(13)))
    if kind == 0:
        obj["description"] = "extra key"
    elif kind == 1:
        del obj["customer"]
    elif kind == 2:
        obj["amount"] = str(obj["amount"])
    elif kind == 3:
        obj["customer"] = None
    elif kind == 4:
        obj["amount"] = obj["amount"] + 0.5
    elif kind == 5:
        obj["lines"] = [{"sku": "s", "qty": 1}] * 32 + [{"sku": "s", "qty": "1"}]  # differs past item 32
    elif kind == 6:
        obj["refunds"] = [{"id": "re_1"}]
    elif kind == 7:
        doc = dict(reversed(list(doc.items())))  # keys in another order
    elif kind == 8:
        return json.dumps(doc).encode()[:-1] + b', "id": 5}'  # a duplicate key, the last one an integer
    elif kind == 9:
        return b"not json at all"
    elif kind == 10:
        return b"[1, 2, 3]"
    elif kind == 11:
        obj["lines"] = [{"sku": "s", "qty": 1}, "mixed item"]
    elif kind == 12:
        obj["billing"]["phone"] = "+1 555 0100"  # a value where only null was
    return json.dumps(doc).encode()


def _general(bodies: list[bytes]) -> Batch:
    """The reference: every body decoded to dicts and walked into its shape, one by one."""
    shapes = Shapes()
    batch = Batch()
    for body in bodies:
        try:
            doc = msgspec.json.decode(body)
        except msgspec.DecodeError:
            continue
        if type(doc) is not dict:
            continue
        shape = shapes.of(doc)
        batch.add(shape, 1, None if shape.id_values is None else [[v] for v in shape.id_values(doc)])
        batch.count += 1
    return batch


def _view(batch: Batch) -> tuple[Counter[Any], dict[str, set[int]]]:
    """What a batch teaches, independent of key order: its samples' paths with their types (an integer and
    a number alike, the one difference a Struct may make), objects and partial items; its id-like values."""
    shapes: Counter[Any] = Counter()
    for shape, n in batch.shapes.items():
        numeric = {"integer": "number"}
        present = frozenset((p, frozenset(numeric.get(k, k) for k in kinds)) for p, kinds in shape.present)
        shapes[(present, shape.objects, shape.partial)] += n
    return shapes, batch.hashes


def _learned(learner: Learner, rows: list[tuple]) -> Batch:
    (batch,) = learner.read(rows).values()
    return batch


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_struct_path_learns_what_the_general_path_learns(seed: int) -> None:
    rng = random.Random(seed)
    learner = Learner()
    by_structs, by_general = State(), State()
    for start in range(0, 2400, 300):
        bodies = [_variant(i, rng) for i in range(start, start + 300)]
        learned, reference = _learned(learner, [_row(i, b) for i, b in enumerate(bodies, start)]), _general(bodies)
        assert learned.count == reference.count
        assert _view(learned) == _view(reference)
        merge(by_structs, learned)
        merge(by_general, reference)
    assert learner._typed, "no sender got a Struct: the fast path was not exercised"
    assert by_structs.total == by_general.total > 1000
    assert by_structs.paths == by_general.paths
    assert by_structs.keys == by_general.keys
    assert fields(by_structs) == fields(by_general)


def test_stable_traffic_takes_the_struct_path() -> None:
    learner = Learner()
    rows = [_row(i, json.dumps(_charge(i)).encode()) for i in range(200)]
    first = _learned(learner, rows)
    assert learner._typed, "the second body of one shape in a row makes that shape the sender's Struct"
    fast = learner._typed.get(("ep_1", "payments", "charge.succeeded"))
    assert fast is not None
    # The next batch is decoded in one pass with the Struct: its single shape is the Struct's.
    second = _learned(learner, [_row(i, json.dumps(_charge(i)).encode()) for i in range(200, 400)])
    assert list(second.shapes) == [fast.shape] == list(first.shapes)
    assert second.count == second.shapes[fast.shape] == 200
    # Id-like values read from Structs are the values the general path reads from dicts.
    expected = _general([json.dumps(_charge(i)).encode() for i in range(200, 400)]).hashes
    assert second.hashes == expected
    assert fast.id_values is not None
    assert fast.id_values(fast.decode(json.dumps(_charge(200)).encode())) == (
        "evt_200",
        "ch_200",
        "cus_4",
        "u200@example.com",
    )


def test_a_struct_accepts_its_shape_only() -> None:
    shapes = Shapes()
    shape = shapes.of({"a": "x", "n": 1.5, "i": 1, "o": {"b": None}, "l": [1], "e": []})
    struct = typed(shape)
    assert struct is not None
    assert struct.decode(b'{"e": [], "l": [2, 3], "o": {"b": null}, "i": 7, "n": 2.5, "a": "y"}')  # any key order
    assert struct.decode(b'{"a": "x", "n": 2, "i": 1, "o": {"b": null}, "l": [1], "e": []}')  # an integer as number
    refused = [
        b'{"a": "x", "n": 1.5, "i": 1, "o": {"b": null}, "l": [1], "e": [], "z": 1}',  # a key more
        b'{"a": "x", "n": 1.5, "i": 1, "o": {"b": null}, "l": [1]}',  # a key less
        b'{"a": null, "n": 1.5, "i": 1, "o": {"b": null}, "l": [1], "e": []}',  # null
        b'{"a": "x", "n": 1.5, "i": 1.0, "o": {"b": null}, "l": [1], "e": []}',  # a number as integer
        b'{"a": "x", "n": 1.5, "i": true, "o": {"b": null}, "l": [1], "e": []}',  # a boolean as integer
        b'{"a": "x", "n": 1.5, "i": 1, "o": {"b": 1}, "l": [1], "e": []}',  # nested
        b'{"a": "x", "n": 1.5, "i": 1, "o": {"b": null}, "l": [], "e": []}',  # an empty array for a full one
        b'{"a": "x", "n": 1.5, "i": 1, "o": {"b": null}, "l": [1], "e": [1]}',  # a full array for an empty one
        b"[1]",
    ]
    for body in refused:
        with pytest.raises(msgspec.ValidationError):
            struct.decode(body)
    with pytest.raises(msgspec.DecodeError):
        struct.decode(b'{"a": "x"')


def test_signatures_no_struct_states_get_none() -> None:
    shapes = Shapes()
    assert typed(shapes.of({"items": [1, "two"]})) is None  # items of two signatures
    assert typed(shapes.of({"items": [{"a": 1}, {"b": 1}]})) is None
    assert typed(shapes.of({"k\\y": 1})) is None  # a key msgspec cannot name: the general path learns it
    odd = typed(shapes.of({"ok": [[1], [2]], "k.e[]y": {"": True}, "é": "x"}))  # other keys are just names
    assert odd is not None
    assert odd.decode(b'{"ok": [[3]], "k.e[]y": {"": false}, "\\u00e9": "y"}')
