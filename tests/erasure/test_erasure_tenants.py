"""Erasure jobs of one account never hold another's (issue 42): a ``value`` of any JSON type and size is either
matched exactly or refused with a 400 naming it; a job whose steps fail ends ``failed`` with why after bounded
retries; and the loop serves accounts in turn, so a hostile account's many jobs (or its failing one) never
make another account's erasure wait behind them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from control.workers.erasures.loop import Erasures
from control.workers.erasures.step import MAX_FAILURES, advance
from control.workers.loop import run_loops
from tests.erasure.conftest import erase, events_of, make_endpoint, stored
from tests.helpers import assert_error, db

BIG = 10**309  # past a float's range: its step raised OverflowError and the job stayed running for ever


def _with(value: object, n: int = 0) -> dict[str, Any]:
    return {"type": "invoice.paid", "n": n, "data": {"object": {"customer": value}}}


async def _job(client: Any, account: Any, job_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/erasures/{job_id}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def _burst(ctx: Any, *, retry_s: float = 0.0) -> None:
    await asyncio.wait_for(run_loops([Erasures(ctx, retry_s=retry_s)], asyncio.Event(), burst=True), 60)


@pytest.mark.parametrize(
    ("value", "different"),
    [
        (BIG, BIG + 1),
        (-(10**999) + 7, -(10**999) + 8),  # 1,000 digits: the largest accepted
        (1e308, 1.0000000000000002e308),
        (5e-324, 0),
        (True, "yes"),
        ("ü" * 1000, "ü" * 999),
    ],
    ids=["310-digit", "1000-digit", "1e308", "5e-324", "true", "1000-chars"],
)
async def test_a_value_of_any_size_is_matched_exactly(client, account, ctx, value, different) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    same = await stored(ctx, endpoint, [_with(value, 1), _with(value, 2)])
    kept = await stored(ctx, endpoint, [_with(different, 3), {"type": "invoice.paid", "other": value}])
    job = await erase(client, account, endpoint, "body.data.object.customer", value)
    await _burst(ctx)
    done = await _job(client, account, job["id"])
    assert (done["state"], done["error"], done["matched"], done["erased"]) == ("completed", None, 2, 2), done
    assert await events_of(ctx.settings.database_url, endpoint) == set(kept)
    assert not set(same) & await events_of(ctx.settings.database_url, endpoint)


async def test_an_integer_matches_its_text_as_equals_does(client, account, ctx) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    both = await stored(ctx, endpoint, [_with(BIG, 1), _with(str(BIG), 2)])
    kept = await stored(ctx, endpoint, [_with(str(BIG) + "0", 3), _with(float("1e308"), 4)])
    job = await erase(client, account, endpoint, "body.data.object.customer", BIG)
    await _burst(ctx)
    assert (await _job(client, account, job["id"]))["matched"] == len(both)
    assert await events_of(ctx.settings.database_url, endpoint) == set(kept)


REFUSED = [
    b"null",
    b"{}",
    b'{"a": 1}',
    b"[]",
    b"[1]",
    b"1" + b"0" * 1000,  # 1,001 digits
    b"1" + b"0" * 5000,  # past what any JSON decoder here keeps as an integer
    b"-1" + b"0" * 20000,
    b"1e400",  # a float beyond double range
    b"-1e400",
    b'""',
    b'"' + b"x" * 1001 + b'"',
    b'"' + b"x" * 2_000_000 + b'"',
    b'"a\\u0000b"',
    b'"\\ud800"',
    b"[" * 20000 + b"]" * 20000,
    b'{"a":' * 20000 + b"1" + b"}" * 20000,
]


@pytest.mark.parametrize("raw", REFUSED, ids=lambda raw: raw[:12].decode("latin-1") + f"...{len(raw)}")
async def test_anything_else_is_a_400_naming_value(client, account, raw: bytes) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    body = b'{"field": "body.data.object.customer", "value": ' + raw + b"}"
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/events/erase",
        content=body,
        headers={**account.headers, "content-type": "application/json"},
    )
    assert resp.status_code in (400, 413), resp.text
    error = assert_error(resp, resp.status_code, resp.json()["error"]["code"])
    assert "value" in error["message"], error
    listed = await client.get("/v1/erasures", headers=account.headers)
    assert listed.json()["erasures"] == []


async def test_a_failing_job_ends_failed_and_never_blocks_another_account(
    client, account, other_account, ctx, database_url
) -> None:
    """Account A: a job over a poison row (fails on every step) and a 310-digit value; account B's erasure
    completes beside them, and A's failing job ends ``failed`` after MAX_FAILURES with its error."""
    hostile = await make_endpoint(client, account, label=False)
    poison = await stored(ctx, hostile, [_with("cus_a", 1), _with("cus_a", 2)])
    async with db(database_url) as conn:
        await conn.execute("UPDATE events SET labels = '[1]'::jsonb WHERE id = $1", poison[1])
    failing = await erase(client, account, hostile, "body.data.object.customer", "cus_a")
    other = await make_endpoint(client, account, label=False)
    await stored(ctx, other, [_with(BIG, 1)])
    big = await erase(client, account, other, "body.data.object.customer", BIG)
    normal = await make_endpoint(client, other_account, label=False)
    theirs = await stored(ctx, normal, [_with("cus_b", 1)])
    job = await erase(client, other_account, normal, "body.data.object.customer", "cus_b")

    await _burst(ctx)
    done = await _job(client, other_account, job["id"])
    assert (done["state"], done["erased"]) == ("completed", len(theirs))
    failed = await _job(client, account, failing["id"])
    assert failed["state"] == "failed", failed
    assert failed["error"].startswith(f"events stage: event {poison[1]} cannot be read"), failed
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT failures FROM erasure_jobs WHERE id = $1", failing["id"]) == MAX_FAILURES
    assert (await _job(client, account, big["id"]))["state"] == "completed"


async def test_accounts_take_steps_in_turn(client, account, other_account, ctx, database_url) -> None:
    """A holds 8 long jobs (many pages each) and a job that keeps failing; B's job, asked for after them all,
    is done within a few steps of the loop (one per account in turn), not after A's jobs."""
    hostile = await make_endpoint(client, account, label=False)
    await stored(ctx, hostile, [_with(f"cus_{n}", n) for n in range(300)])
    for n in range(8):
        await erase(client, account, hostile, "body.data.object.customer", f"cus_{n}")
    poisoned = await make_endpoint(client, account, label=False)
    (bad,) = await stored(ctx, poisoned, [_with("cus_p", 1)])
    async with db(database_url) as conn:
        await conn.execute("UPDATE events SET labels = '[1]'::jsonb WHERE id = $1", bad)
    await erase(client, account, poisoned, "body.data.object.customer", "cus_p")
    for _ in range(12):  # A's jobs under way: each has been advanced, the failing one has failed steps
        await advance(ctx, page=10, retry_s=0)

    normal = await make_endpoint(client, other_account, label=False)
    await stored(ctx, normal, [_with("cus_b", 1)])
    job = await erase(client, other_account, normal, "body.data.object.customer", "cus_b")
    steps = 0
    while (await _job(client, other_account, job["id"]))["state"] != "completed":
        taken, _ = await advance(ctx, page=10, retry_s=0)
        assert taken is not None
        steps += 1
        assert steps <= 10, "B's job waited behind A's"
    # B's job has four stages (ingest, events, deferred, finish): alternating with A, at most eight steps.
    assert steps <= 8, steps


async def test_mcp_refuses_what_v1_refuses(client, account) -> None:
    """The shared check (``check_request``) holds for MCP's decoded arguments too: a 1,001-digit integer."""
    from control.service.erasures import check_request
    from shared.errors import ValidationError

    for value in (10**1000, -(10**1000), None, {"a": 1}, [1], float("inf"), float("nan"), ""):
        with pytest.raises(ValidationError, match=r"^value: "):
            check_request("body.x", value)
    assert check_request("body.x", 10**1000 - 1) == ("body.x", 10**1000 - 1)
    assert json.loads(json.dumps(10**1000 - 1)) == 10**1000 - 1


async def test_a_sender_nesting_a_body_20000_deep_cannot_fail_the_erasure(client, account, ctx) -> None:
    """A body too deep to decode has no body field, as a body that is not JSON (it was a poison row that
    failed every erasure of its endpoint)."""
    endpoint = await make_endpoint(client, account, label=False)
    deep = b'{"note": "cus_a", "a":' + b'{"a":' * 20_000 + b"1" + b"}" * 20_001  # a candidate: it holds the value
    (kept,) = await stored(ctx, endpoint, [deep])
    await stored(ctx, endpoint, [_with("cus_a", 1)])
    job = await erase(client, account, endpoint, "body.data.object.customer", "cus_a")
    await _burst(ctx)
    done = await _job(client, account, job["id"])
    assert (done["state"], done["erased"], done["error"]) == ("completed", 1, None), done
    assert await events_of(ctx.settings.database_url, endpoint) == {kept}
