"""A type change cuts a version at once, in the warm-up too (issue 26): code generated from version 1 must
not break without a version and a breaking change to show for it. Only fields added or turned optional in
the warm-up amend version 1 (a schema's first samples cannot tell an optional field from a late one).

Through the real flush, read through the service functions /v1 and MCP call; and a state written before
presence was counted relative to the parent is carried over."""

from __future__ import annotations

import msgspec

from control.db.context import Context
from control.schemas.shape import Shapes
from control.schemas.state import WARMUP, Batch, decode_state, encode_state, fields, merge, next_version
from control.service import schemas as service
from tests.schemas.support import learned, principal


async def test_a_type_change_in_the_warm_up_cuts_a_breaking_version(ctx: Context, database_url: str) -> None:
    def issue(i: int, closed_at: object, number: object) -> dict[str, object]:
        return {"action": "opened", "issue": {"id": i, "number": number, "closed_at": closed_at}}

    first = [("issues", issue(i, "2024-01-01T00:00:00Z", i)) for i in range(40)]
    nulls = [("issues", {**issue(i, None, i), "label": {"name": "bug"}}) for i in range(40, 50)]
    strings = [("issues", issue(i, "2024-01-02T00:00:00Z", f"#{i}")) for i in range(50, 60)]
    assert len(first + nulls + strings) < WARMUP
    account_id, schemas = await learned(ctx, database_url, first, nulls, strings)
    me, schema_id = principal(account_id), schemas["issues"]

    versions = await service.schema_versions(ctx, me, schema_id)
    assert [v.version for v in versions.versions] == [3, 2, 1]
    assert [v.sample_count for v in versions.versions] == [10, 10, 40]
    nullable = await service.schema_diff(ctx, me, schema_id, "1", "2")
    assert [(c.path, c.change, c.breaking) for c in nullable.changes] == [
        ("issue.closed_at", "became_nullable", True),
        ("label", "added", False),
        ("label.name", "added", False),
    ]
    retyped = await service.schema_diff(ctx, me, schema_id, "2", "3")
    assert [(c.path, c.change, c.breaking) for c in retyped.changes] == [("issue.number", "type_changed", True)]
    current = {f.path: f for f in (await service.get_schema(ctx, me, schema_id)).fields}
    assert current["issue.number"].types == ["integer", "string"]
    assert current["label"].optional
    assert current["label.name"].optional is False


def test_a_state_from_before_opened_and_digest_is_carried_over() -> None:
    """A state as the previous rule wrote it (no ``opened``, path stats of seven items, the structure stored
    whole in ``cut``) decodes and learns on: what it had counted stands in for the new counts, and the same
    structure is no new version."""
    old = {
        "total": 200,
        "paths": {"a": [200, 1, 200, 0, 0, ["object"], False], "a.b": [4, 197, 200, 196, 196, ["string"], False]},
        "keys": {},
        "version": 1,
        "cut": [["a", ["object"], False], ["a.b", ["string"], True]],
    }
    state = decode_state(msgspec.msgpack.encode(old))
    assert state.opened == -1

    def learn(doc: dict[str, object]) -> tuple[int, bool] | None:
        batch = Batch()
        batch.add(Shapes().of(doc), 1, None)
        batch.count = 1
        start = state.total + 1
        return next_version(state, start, merge(state, batch))

    assert learn({"a": {"b": "x"}}) is None  # the structure it had: no version
    assert state.opened == 201
    assert state.cut == []
    assert state.digest
    assert learn({"a": {"b": "x", "c": 1}}) == (2, True)  # past the warm-up: a field added is a version
    by_path = {f["path"]: f for f in fields(decode_state(encode_state(state)))}
    assert by_path["a.b"]["presence"] == round(6 / 202, 4)  # its 4 old sightings and 2 new, of 202 `a`
    assert by_path["a.c"]["optional"] is True  # missed by the 201 `a` objects before it
    assert by_path["a.c"]["presence"] == round(1 / 202, 4)
