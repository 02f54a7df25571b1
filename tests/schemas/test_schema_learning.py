"""Schema learning in the flush: shapes per account and (provider, event type), per endpoint without a
provider; versions only on real change; learned once per event; kept after the endpoint is gone.

Events go through the real ingest stream, the real flush (``control.workers.flush``, noting new events)
and the learn worker (``control.workers.learn``), into the test's Postgres; what was learned is read through
the service functions /v1 uses."""

from __future__ import annotations

import random
from typing import Any

import asyncpg

from control.db.context import Context
from control.schemas.learn import Learner
from control.schemas.state import WARMUP, WINDOW
from control.service import schemas as service
from tests.conftest import make_account
from tests.schemas.support import flush, make_endpoint, principal, record


def paid(i: int, rng: random.Random) -> dict[str, Any]:
    """A stable but varied payments event: optional and nullable fields at their own rates."""
    obj: dict[str, Any] = {
        "id": f"pi_{i}",
        "amount": rng.randint(1, 10_000),
        "currency": rng.choice(["usd", "eur"]),
        "customer": rng.choice([f"cus_{rng.randint(1, 50)}", None]),
        "items": [{"sku": f"s{j}", "qty": j + 1} for j in range(rng.randint(0, 3))],
    }
    if rng.random() < 0.3:
        obj["description"] = "a note"
    if rng.random() < 0.5:
        obj["metadata"] = {"order": str(i)}
    return {"id": f"evt_{i}", "type": "payment_intent.succeeded", "data": {"object": obj}, "livemode": False}


async def test_stable_varied_traffic_makes_one_version(ctx: Context, database_url: str) -> None:
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    rng = random.Random(7)
    await flush(ctx, [record(endpoint_id, paid(i, rng)) for i in range(10_000)])
    listed = await service.list_schemas(ctx, principal(account.id))
    assert len(listed.schemas) == 1
    schema = listed.schemas[0]
    assert (schema.provider, schema.event_type, schema.endpoint_id) == ("payments", "payment_intent.succeeded", None)
    assert schema.sample_count == 10_000
    assert schema.current_version == 1
    assert schema.version_count == 1
    by_path = {f.path: f for f in schema.fields}
    assert by_path["data.object.amount"].types == ["integer"]
    assert not by_path["data.object.amount"].optional
    assert by_path["data.object.customer"].types == ["null", "string"]
    assert by_path["data.object.customer"].nullable
    assert by_path["data.object.description"].optional
    assert 0.25 < by_path["data.object.description"].presence < 0.35
    assert by_path["data.object.metadata.order"].optional is False  # required where its parent is present
    assert by_path["data.object.metadata"].optional
    assert by_path["data.object.items"].types == ["array"]
    assert by_path["data.object.items[]"].types == ["object"]
    assert not by_path["data.object.items[].sku"].optional
    versions = await service.schema_versions(ctx, principal(account.id), schema.id)
    assert [v.version for v in versions.versions] == [1]
    assert versions.versions[0].sample_count == 10_000


async def test_versions_on_real_change_and_late_optional_field_does_not_flap(ctx: Context, database_url: str) -> None:
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    learner = Learner()
    base = {"type": "charge.refunded", "id": "ch_1", "amount": 5, "legacy": True}
    await flush(ctx, [record(endpoint_id, base) for _ in range(WARMUP + 50)], learner)
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert schema.current_version == 1
    # A rare optional field first seen late: one version (added), then it comes and goes without new ones.
    late = [record(endpoint_id, {**base, "reason": "dup"} if i % 400 == 0 else base) for i in range(3 * WINDOW)]
    await flush(ctx, late, learner)
    got = await service.get_schema(ctx, principal(account.id), schema.id)
    assert got.current_version == 2
    assert {f.path: f.optional for f in got.fields}["reason"] is True
    # A type change, and a field becoming nullable: one version each.
    await flush(ctx, [record(endpoint_id, {**base, "amount": "5"})], learner)
    await flush(ctx, [record(endpoint_id, {**base, "id": None})], learner)
    got = await service.get_schema(ctx, principal(account.id), schema.id)
    assert got.current_version == 4
    change = await service.schema_diff(ctx, principal(account.id), schema.id, to="3")
    assert [(c.path, c.change, c.breaking) for c in change.changes] == [("amount", "type_changed", True)]
    change = await service.schema_diff(ctx, principal(account.id), schema.id)
    assert [(c.path, c.change, c.breaking) for c in change.changes] == [("id", "became_nullable", True)]
    change = await service.schema_diff(ctx, principal(account.id), schema.id, from_="1", to="2")
    assert [(c.path, c.change, c.breaking) for c in change.changes] == [("reason", "added", False)]
    # A field that was always there goes missing: optional at once (a validator must not reject the events
    # without it), then, missing from its whole recent window (WINDOW samples), removed. The rare field,
    # missing as long, stays: its window is twenty of its own mean gaps.
    without = {"type": "charge.refunded", "id": "ch_1", "amount": 1}
    await flush(ctx, [record(endpoint_id, without) for _ in range(WINDOW - 10)], learner)
    assert (await service.get_schema(ctx, principal(account.id), schema.id)).current_version == 5
    widened = await service.schema_diff(ctx, principal(account.id), schema.id)
    assert [(c.path, c.change, c.breaking) for c in widened.changes] == [("legacy", "type_changed", True)]
    assert widened.changes[0].after is not None
    assert widened.changes[0].after.optional
    await flush(ctx, [record(endpoint_id, without) for _ in range(20)], learner)
    got = await service.get_schema(ctx, principal(account.id), schema.id)
    assert got.current_version == 6
    removed = await service.schema_diff(ctx, principal(account.id), schema.id)
    assert [(c.path, c.change, c.breaking) for c in removed.changes] == [("legacy", "removed", True)]
    assert {f.path for f in got.fields} == {"amount", "id", "reason", "type"}


async def test_unattributed_is_per_endpoint_and_learned_once(ctx: Context, database_url: str) -> None:
    account = await make_account(database_url)
    first, second = [await make_endpoint(database_url, account.id) for _ in range(2)]
    records = [record(first, {"a": 1}, provider=None) for _ in range(3)] + [record(second, {"b": "x"}, provider=None)]
    await flush(ctx, records)
    await flush(ctx, records)  # the same events again (a re-processed entry): nothing learned twice
    schemas = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert sorted((s.endpoint_id, s.sample_count, [f.path for f in s.fields]) for s in schemas) == sorted(
        [(first, 3, ["a"]), (second, 1, ["b"])]
    )
    on_first = await service.endpoint_schemas(ctx, principal(account.id), first)
    assert [s.endpoint_id for s in on_first.schemas] == [first]


async def test_a_batch_of_stored_and_new_events_learns_the_new_ones_once(ctx: Context, database_url: str) -> None:
    """The flush reads a batch's shapes before its insert says which events are new; a batch that mixes
    events stored before with new ones is learned from the new ones alone."""
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    stored = [record(endpoint_id, {"type": "t", "a": 1}) for _ in range(3)]
    await flush(ctx, stored)
    new = [record(endpoint_id, {"type": "t", "a": 1, "b": "x"}) for _ in range(2)]
    await flush(ctx, stored + new)  # one entry: three stored before, two new
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert schema.sample_count == 5
    assert {f.path: f.presence for f in schema.fields} == {"a": 1.0, "b": 0.4, "type": 1.0}


async def test_not_learned_from_refused_or_non_object_bodies(ctx: Context, database_url: str) -> None:
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    await flush(
        ctx,
        [
            record(endpoint_id, {"type": "t", "forged": 1}, signature_valid=False),
            record(endpoint_id, {"type": "t", "blocked": 1}, ip_allowed=False),
            record(endpoint_id, b"[1, 2]", event_type="t"),
            record(endpoint_id, b"not json {", event_type="t"),
            record(endpoint_id, b'{"type": "t", "deep": ' + b"[" * 5000 + b"]" * 5000 + b"}", event_type="t"),
            record(endpoint_id, {"type": "t", "a\u0000b": 1, "k.e[y]": {"x": True}}),
        ],
    )
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert [f.path for f in schema.fields] == ["k\\.e\\[y]", "k\\.e\\[y].x", "type"]
    assert schema.sample_count == 1


async def test_schemas_outlive_the_endpoint_and_stay_in_their_account(ctx: Context, database_url: str) -> None:
    account, other = await make_account(database_url), await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    await flush(ctx, [record(endpoint_id, {"type": "x.y", "id": "1"})])
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DELETE FROM events")
        await conn.execute("DELETE FROM endpoints WHERE id = $1", endpoint_id)
    finally:
        await conn.close()
    (schema,) = (await service.list_schemas(ctx, principal(account.id))).schemas
    assert [f.path for f in schema.fields] == ["id", "type"]
    assert (await service.list_schemas(ctx, principal(other.id))).schemas == []


async def test_a_learning_failure_never_blocks_ingestion(ctx: Context, database_url: str, caplog: Any) -> None:
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    learner = Learner()
    await flush(ctx, [record(endpoint_id, {"type": "t", "a": 1})], learner)
    conn = await asyncpg.connect(database_url)
    try:  # a state no decoder reads (written by who knows what): learning from it fails
        await conn.execute("UPDATE schemas SET state = '\\x00ff'::bytea, revision = revision + 1")
        later = record(endpoint_id, {"type": "t", "a": 2})
        await flush(ctx, [later], learner)
        assert await conn.fetchval("SELECT count(*) FROM events WHERE id = $1", later.id) == 1
        assert await conn.fetchval("SELECT sample_count FROM schemas") == 1
    finally:
        await conn.close()
    assert "learning from 1 new events failed" in caplog.text
