"""Erasure (issue 29 section 3): ``POST /v1/endpoints/{id}/events/erase`` removes every event of the endpoint
whose field has the value, exactly (counts, and nothing else), with its deliveries, delivery tasks, dead
letters and the value in the schemas' correlation sketches; the job is the audit record afterwards."""

from __future__ import annotations

import hashlib

import pytest

from control.schemas.batch import hash_value
from control.schemas.state import decode_state
from shared.wire import encode_records
from tests.erasure.conftest import erase, events_of, make_endpoint, run_erasures, stored
from tests.helpers import assert_error
from tests.schemas.support import record

ALICE = "cus_alice"


def _payment(customer: object, n: int = 0) -> dict[str, object]:
    return {"id": f"evt_{n}", "type": "invoice.paid", "data": {"object": {"customer": customer, "amount": n}}}


async def _hashes(conn, endpoint_id: str) -> set[int]:
    """Every hash in every correlation sketch of the schemas learned on the endpoint."""
    rows = await conn.fetch(
        "SELECT s.state FROM schemas s JOIN schema_endpoints se ON se.schema_id = s.id WHERE se.endpoint_id = $1",
        endpoint_id,
    )
    return {h for r in rows for sketch in decode_state(r["state"]).keys.values() for h in sketch.hashes}


async def test_erase_by_body_field_is_exact_and_leaves_the_rest(
    client, account, other_account, ctx, conn, database_url
) -> None:
    mine = await make_endpoint(client, account)
    sibling = await make_endpoint(client, account)
    theirs = await make_endpoint(client, other_account)
    escaped = b'{"type": "invoice.paid", "data": {"object": {"customer": "cus_\\u0061lice"}}}'  # JSON for cus_alice
    alice = await stored(ctx, mine, [_payment(ALICE, 1), _payment(ALICE, 2), escaped])
    kept = await stored(
        ctx,
        mine,
        [
            _payment("cus_bob", 3),
            {"type": "invoice.paid", "data": {"object": {"note": ALICE}}},  # the value elsewhere in the body
            b"customer=cus_alice",  # not JSON: it has no body field
            _payment(ALICE + "x", 4),
        ],
    )
    others = await stored(ctx, sibling, [_payment(ALICE, 5)]) + await stored(ctx, theirs, [_payment(ALICE, 6)])
    assert hash_value(ALICE) in await _hashes(conn, mine)

    job = await erase(client, account, mine, "body.data.object.customer", ALICE)
    assert job["id"].startswith("erase_")
    assert (job["state"], job["value"], job["matched"], job["erased"]) == ("pending", ALICE, 0, 0)
    await run_erasures(ctx)

    done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
    assert (done["state"], done["matched"], done["erased"], done["deliveries_erased"]) == ("completed", 3, 3, 3)
    assert done["value"] is None, "the audit record keeps no personal data"
    assert done["value_sha256"] == hashlib.sha256(f'{job["id"]}:"{ALICE}"'.encode()).hexdigest()
    assert (done["scanned"], done["schemas_scrubbed"]) == (7, 1)
    assert done["finished_at"] is not None
    assert await events_of(database_url, mine) == set(kept)
    assert await events_of(database_url, sibling) | await events_of(database_url, theirs) == set(others)
    for table in ("deliveries", "delivery_tasks"):
        left = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE event_id = any($1::text[])", alice)
        assert left == 0, table
        assert await conn.fetchval(f"SELECT count(*) FROM {table} WHERE event_id = any($1::text[])", kept) == 4
    holding = "SELECT count(*) FROM deliveries WHERE position($1::bytea IN request_body) > 0"
    assert await conn.fetchval(holding, b'"cus_alice"') == 3  # the note's, the sibling's and the other account's
    # The learned schema keeps no value of it; the other account's schema is untouched.
    assert hash_value(ALICE) not in await _hashes(conn, mine)
    assert hash_value("cus_bob") in await _hashes(conn, mine)
    assert hash_value(ALICE) in await _hashes(conn, theirs)
    (schema,) = (await client.get(f"/v1/endpoints/{mine}/schemas", headers=account.headers)).json()["schemas"]
    found = (await client.get(f"/v1/schemas/{schema['id']}/correlations", headers=account.headers)).json()
    customer = next(c for c in found["candidates"] if c["path"] == "data.object.customer")
    assert customer["distinct"] == 2  # cus_bob and cus_alicex: cus_alice is gone (the sibling's too, by design)


async def test_erase_by_label_and_by_header(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    by_label = await stored(ctx, endpoint, [_payment("cus_7", 1), _payment("cus_8", 2)])
    by_header = await stored(
        ctx, endpoint, [_payment("x", 3), _payment("y", 4)], headers=[{"x-user": "u-9"}, {"x-user": "u-99"}]
    )
    first = await erase(client, account, endpoint, "meta.label.customer", "cus_7")
    second = await erase(client, account, endpoint, "header.X-User", "u-9")
    assert second["field"] == "header.x-user"
    await run_erasures(ctx)
    for job in (first, second):
        done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
        assert (done["state"], done["matched"], done["erased"]) == ("completed", 1, 1)
    assert await events_of(database_url, endpoint) == {by_label[1], by_header[1]}
    listed = (await client.get("/v1/erasures", params={"endpoint_id": endpoint}, headers=account.headers)).json()
    assert [e["id"] for e in listed["erasures"]] == [second["id"], first["id"]]


async def test_a_number_matches_as_equals_does(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    bodies = [{"type": "t", "n": 42}, {"type": "t", "n": "42"}, b'{"type": "t", "n": 4.2e1}', {"type": "t", "n": 43}]
    ids = await stored(ctx, endpoint, bodies)
    job = await erase(client, account, endpoint, "body.n", 42)
    await run_erasures(ctx)
    done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
    assert (done["matched"], done["erased"]) == (3, 3)
    assert await events_of(database_url, endpoint) == {ids[3]}


async def test_an_event_with_an_attempt_in_flight_waits_for_it(client, account, ctx, conn, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    (busy,) = await stored(ctx, endpoint, [_payment(ALICE)])
    await conn.execute("UPDATE delivery_tasks SET status = 'in_flight' WHERE event_id = $1", busy)
    job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
    await run_erasures(ctx)
    row = await conn.fetchrow("SELECT state, stage, matched, erased FROM erasure_jobs WHERE id = $1", job["id"])
    assert tuple(row) == ("running", "deferred", 1, 0)
    assert await events_of(database_url, endpoint) == {busy}
    # The attempt is recorded (its delivery row with the body), the task no longer in flight: erased with it.
    await conn.execute("UPDATE delivery_tasks SET status = 'failed' WHERE event_id = $1", busy)
    await run_erasures(ctx)
    row = await conn.fetchrow(
        "SELECT state, matched, erased, deliveries_erased FROM erasure_jobs WHERE id = $1", job["id"]
    )
    assert tuple(row) == ("completed", 1, 1, 1)
    assert await events_of(database_url, endpoint) == set()


async def test_dead_letters_of_the_endpoint_with_the_value_go(client, account, ctx) -> None:
    endpoint = await make_endpoint(client, account)
    stream = ctx.keys.dead_letter_stream(0)
    for customer in (ALICE, "cus_bob"):
        r = record(endpoint, _payment(customer))
        fields = {"r": encode_records([r]), "error": b"refused", "entry": b"1-0", "event": r.id.encode()}
        await ctx.redis.xadd(stream, {**fields, "endpoint": endpoint.encode()})
    job = await erase(client, account, endpoint, "body.data.object.customer", ALICE)
    await run_erasures(ctx)
    done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
    assert (done["dead_letters_erased"], done["matched"]) == (1, 0)
    (left,) = await ctx.redis.xrange(stream)
    assert b"cus_bob" in left[1][b"r"]


async def test_two_workers_run_one_job_once(client, account, ctx, database_url) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    bodies = [{"type": "t", "customer": ALICE if i % 3 else "cus_bob", "i": i} for i in range(900)]
    await stored(ctx, endpoint, bodies)
    job = await erase(client, account, endpoint, "body.customer", ALICE)
    await run_erasures(ctx, workers=2, page=50)
    done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
    assert (done["matched"], done["erased"], done["deliveries_erased"], done["scanned"]) == (600, 600, 600, 900)
    assert len(await events_of(database_url, endpoint)) == 300


HOSTILE = [
    ({"field": "body.a\u0000", "value": "x"}, "field"),
    ({"field": "body.a", "value": "x\u0000y"}, "value"),
    ({"field": "body.a", "value": "x" * 1001}, "value"),
    ({"field": "body..a", "value": "x"}, "field"),
    ({"field": "bodyx", "value": "x"}, "field"),
    ({"field": "meta.nope", "value": "x"}, "field"),
    ({"field": "header.a b", "value": "x"}, "field"),
    ({"field": "x" * 1001, "value": "x"}, "field"),
    ({"field": "body.a", "value": {"a": 1}}, "value"),
    ({"field": "body.a", "value": [1]}, "value"),
    ({"field": "body.a", "value": None}, "value"),
    ({"field": "body.a", "value": ""}, "value"),
    ({"field": "body.a"}, "value"),
    ({"value": "x"}, "field"),
    ({"field": 3, "value": "x"}, "field"),
]


@pytest.mark.parametrize(("body", "named"), HOSTILE)
async def test_hostile_input_is_a_400_naming_the_field(client, account, body, named) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    resp = await client.post(f"/v1/endpoints/{endpoint}/events/erase", json=body, headers=account.headers)
    error = assert_error(resp, 400, "validation_error")
    assert error["message"].startswith(named), error


async def test_unknown_endpoint_and_unknown_job_are_404(client, account, other_account) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    body = {"field": "body.a", "value": "x"}
    resp = await client.post(f"/v1/endpoints/{endpoint}/events/erase", json=body, headers=other_account.headers)
    assert_error(resp, 404, "not_found")
    job = await erase(client, account, endpoint, "body.a", "x")
    assert_error(await client.get(f"/v1/erasures/{job['id']}", headers=other_account.headers), 404, "not_found")
    assert_error(await client.get("/v1/erasures/erase_nope", headers=account.headers), 404, "not_found")
