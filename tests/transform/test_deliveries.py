"""Rule deliveries through a destination's transform: a real deliver worker, loopback destinations, rows and
destinations written through /v1. The two worked examples of the docs run here as written there."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import msgspec
import pytest
import standardwebhooks

from control.db.context import Context
from control.transform.pool import pool_for
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, fetch_row, make_task, running, serving, settled
from tests.helpers import wait_for
from tests.transform.delivering import add_destination, delivery_row, has_attempts
from tests.transform.fatal import FATAL

SLACK = """function handler(request, context) {
  const event = request.body;
  return {
    ...request,
    body: { text: `${event.type}: ${event.data.object.id} (${context.event.id})` },
  };
}"""

INVOICES_ONLY = """function handler(request, context) {
  if (!String(request.body.type).startsWith("invoice.")) return null;  // skip everything else
  request.headers["x-billing-team"] = "yes";
  console.log("forwarding", request.body.type);
  return request;
}"""

STRIPE_BODY = b'{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_42","amount_due":2000}}}'


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY, circuit_failure_threshold=3)


async def test_a_slack_shaped_body_is_sent_and_signed_as_sent(ctx: Context, client, account, destination) -> None:
    endpoint, dst, secret = await add_destination(client, account, destination.url, SLACK)
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    expected = {"text": f"invoice.paid: in_42 ({made['event']})"}
    assert msgspec.json.decode(got.body) == expected
    assert got.headers["content-type"] == "application/json"
    # hookyard's signature is over the body the transform returned, not the captured one
    assert standardwebhooks.Webhook(secret).verify(got.body, got.headers) == expected
    row = await delivery_row(ctx, made["task"])
    assert bytes(row["request_body"]) == got.body  # the record is what was sent
    assert row["transform"]["outcome"] == "applied"
    # Every field transforms.md promises, on every attempt: an applied one too (it once read only
    # {outcome, duration_ms}), stored and as /v1 answers it.
    record = {"outcome", "error", "logs", "logs_truncated", "duration_ms"}
    assert set(row["transform"]) == record, row["transform"]
    record_values = (row["transform"]["error"], row["transform"]["logs"], row["transform"]["logs_truncated"])
    assert record_values == (None, [], False)
    answered = (await client.get(f"/v1/events/{made['event']}", headers=account.headers)).json()
    assert set(answered["deliveries"][0]["transform"]) == record, answered["deliveries"]


REROUTE = """function handler(request) {
  return { ...request, path: "/billing/" + request.body.type, query: "team=finance" };
}"""


async def test_a_changed_path_and_query_are_recorded_as_the_url_sent(
    ctx: Context, client, account, destination
) -> None:
    endpoint, dst, _ = await add_destination(client, account, destination.url + "/hooks?v=1", REROUTE)
    configured = destination.url + "/hooks?v=1"
    made = await make_task(ctx, configured, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    assert got.target == "/billing/invoice.paid?team=finance"
    sent = await fetch_row(ctx, "SELECT destination_url FROM deliveries WHERE task_id = $1", made["task"])
    origin = destination.url.removesuffix(urlsplit(destination.url).path)
    assert sent["destination_url"] == origin + "/billing/invoice.paid?team=finance"  # not the configured URL


async def test_only_invoices_go_out_with_an_added_header(ctx: Context, client, account, destination) -> None:
    endpoint, dst, _ = await add_destination(client, account, destination.url, INVOICES_ONLY)
    other = b'{"id":"evt_2","type":"customer.created","data":{}}'
    invoice = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    skipped = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=other)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, invoice["task"], "succeeded")
        done = await settled(ctx, skipped["task"], "succeeded")
    assert got.body == STRIPE_BODY  # unchanged body: the captured bytes, exactly
    assert got.headers["x-billing-team"] == "yes"
    assert done["attempts"] == 1
    assert done["last_error"] is None
    row = await delivery_row(ctx, skipped["task"])
    assert (row["success"], row["response_status"], row["request_body"]) == (True, None, None)
    assert row["transform"]["outcome"] == "skipped"
    assert (await delivery_row(ctx, invoice["task"]))["transform"]["logs"] == ["forwarding invoice.paid"]
    assert len(destination.requests) == 1  # the skipped one never went out


async def test_a_body_left_as_handed_in_goes_out_as_captured(ctx: Context, client, account, destination) -> None:
    """V8 holds numbers as doubles: a body the transform does not touch is told unchanged by its JSON in V8, not
    by what came back, and goes out as the captured bytes, digits past 2^53, spacing and escapes kept."""
    endpoint, dst, _ = await add_destination(client, account, destination.url, INVOICES_ONLY)
    body = b'{"type": "invoice.paid", "big": 12345678901234567890123, "total": 48.0, "name": "J\\u00fcrgen"}'
    task = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=body)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, task["task"], "succeeded")
    assert got.body == body
    assert got.headers["x-billing-team"] == "yes"


async def test_a_throwing_transform_fails_once_keeps_the_circuit_and_retries_with_new_code(
    ctx: Context, client, account, destination
) -> None:
    broken = "function handler(request) {\n  return request.body.missing.id;\n}"
    endpoint, dst, _ = await add_destination(client, account, destination.url, broken)
    made = [await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst) for _ in range(5)]
    async with running(ctx):
        done = [await settled(ctx, m["task"], "failed") for m in made]
        assert {(d["attempts"], d["last_error"]) for d in done} == {
            (1, "transform failed: TypeError: Cannot read properties of undefined (reading 'id') (line 2)")
        }
        circuit = await fetch_row(ctx, "SELECT circuit FROM destinations WHERE id = $1", dst)
        assert circuit["circuit"] == "closed"  # 5 failures, threshold 3: the destination was never tried
        row = await delivery_row(ctx, made[0]["task"])
        assert row["success"] is False
        assert row["transform"]["error"] == {
            "message": "TypeError: Cannot read properties of undefined (reading 'id')",
            "line": 2,
        }
        assert destination.requests == []

        fixed = "function handler(request) {\n  request.headers['x-fixed'] = '1';\n  return request;\n}"
        resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": fixed}, headers=account.headers)
        assert resp.status_code == 200, resp.text
        delivery_id = (await fetch_row(ctx, "SELECT id FROM deliveries WHERE task_id = $1", made[0]["task"]))["id"]
        resp = await client.post(f"/v1/deliveries/{delivery_id}/retry", headers=account.headers)
        assert resp.status_code == 202, resp.text
        (got,) = await destination.wait_for(1)
        await settled(ctx, made[0]["task"], "succeeded")
    assert got.headers["x-fixed"] == "1"


async def test_a_runaway_transform_does_not_hold_up_another_accounts_destinations(
    ctx: Context, client, account, other_account
) -> None:
    """One account holds at most its share of the sandbox processes (half of them, 1 of 2 here): another
    account's transforms run meanwhile, so its deliveries all arrive while the runaway still runs (it is
    stopped after 1 s). Said by order, not by a clock: two processes are up before the tasks are made, and
    the fast ones must be through before the runaway's call is over. The wall-clock bound of 1 s this had
    counted a sandbox process's start: on a quarter of a core the fast ones took 1.01-1.12 s (4 runs of 5)."""
    with serving() as slow_sink, serving() as fast_sink:
        endpoint, spinning, _ = await add_destination(
            client, account, slow_sink.url, "function handler() { for (;;) {} }"
        )
        transform = "function handler(r) { r.headers['x-ok'] = '1'; return r; }"
        other, healthy, _ = await add_destination(client, other_account, fast_sink.url, transform)
        pool = pool_for(ctx.settings)  # the deliver worker's pool: this event loop's
        await asyncio.gather(*(pool.check(transform, account=a.id) for a in (account, other_account)))
        stuck = await make_task(ctx, slow_sink.url, endpoint_id=endpoint, destination_id=spinning)
        quick = [await make_task(ctx, fast_sink.url, endpoint_id=other, destination_id=healthy) for _ in range(5)]
        async with running(ctx) as deliver:

            async def runaway_running() -> bool:  # its transform sent to the pool, not yet answered or stopped
                return any(t.id == stuck["task"] for tasks, _ in deliver._transforming.values() for t in tasks)

            await wait_for(runaway_running, interval=0.002)
            got = await fast_sink.wait_for(5)
            assert await runaway_running()  # all 5 arrived before the runaway one was stopped
            failed = await settled(ctx, stuck["task"], "failed")
        assert {g.headers["x-ok"] for g in got} == {"1"}
        assert failed["last_error"] == "transform failed: stopped: still running after 1 s"
        assert slow_sink.requests == []
        for m in quick:
            await settled(ctx, m["task"], "succeeded")


async def test_a_removed_transform_sends_as_captured(ctx: Context, client, account, destination) -> None:
    endpoint, dst, _ = await add_destination(client, account, destination.url, "function handler() { return null; }")
    resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": None}, headers=account.headers)
    assert resp.json()["transform"] is None
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    assert got.body == STRIPE_BODY
    assert (await delivery_row(ctx, made["task"]))["transform"] is None


async def test_a_transform_that_ends_its_process_fails_alone_and_is_marked(
    ctx: Context, client, account, other_account
) -> None:
    """The worker keeps delivering another account's destination; the crashing transform is marked on its
    destination, not run again until a retry asks or its code changes (``FATAL``: a V8 fatal error within
    milliseconds of the call, never killed for time instead)."""
    crash = FATAL
    with serving() as bad_sink, serving() as good_sink:
        endpoint, bad, _ = await add_destination(client, account, bad_sink.url, crash)
        other, good, _ = await add_destination(client, other_account, good_sink.url, None)
        first = await make_task(ctx, bad_sink.url, endpoint_id=endpoint, destination_id=bad)
        plain = [await make_task(ctx, good_sink.url, endpoint_id=other, destination_id=good) for _ in range(20)]
        async with running(ctx):
            await good_sink.wait_for(20)
            failed = await settled(ctx, first["task"], "failed")
            assert failed["last_error"].startswith("transform failed: stopped: the transform ended its sandbox process")
            for m in plain:
                await settled(ctx, m["task"], "succeeded")
            shown = (await client.get(f"/v1/destinations/{bad}", headers=account.headers)).json()
            assert shown["transform_crashed_at"] is not None
            assert "Fatal" in shown["transform_crash"] or "SIG" in shown["transform_crash"], shown
            second = await make_task(ctx, bad_sink.url, endpoint_id=endpoint, destination_id=bad)
            again = await settled(ctx, second["task"], "failed")
            assert "not run: this transform ended its sandbox process" in again["last_error"]
            delivery = await fetch_row(ctx, "SELECT id FROM deliveries WHERE task_id = $1", second["task"])
            retried = await client.post(f"/v1/deliveries/{delivery['id']}/retry", headers=account.headers)
            assert retried.status_code in (200, 202), retried.text
            await wait_for(lambda: has_attempts(ctx, second["task"], 2))  # the retry ran the transform again
            ran = await settled(ctx, second["task"], "failed")
            assert ran["last_error"].startswith("transform failed: stopped: the transform ended its sandbox process")
            fixed = "function handler(r) { r.headers['x-fixed'] = '1'; return r; }"
            resp = await client.patch(f"/v1/destinations/{bad}", json={"transform": fixed}, headers=account.headers)
            assert resp.json()["transform_crashed_at"] is None
            third = await make_task(ctx, bad_sink.url, endpoint_id=endpoint, destination_id=bad)
            (got,) = await bad_sink.wait_for(1)
            await settled(ctx, third["task"], "succeeded")
        assert got.headers["x-fixed"] == "1"


async def test_a_lone_surrogate_out_of_a_destinations_transform_fails_its_task(ctx: Context, client, account) -> None:
    """Not a crash of the attempt re-leased for ever: a failed attempt, recorded, the task done."""
    with serving() as sink:
        transform = 'function handler(r) { console.log("\\ud800"); r.headers["x-a"] = "\\udc00"; return r; }'
        endpoint, dst, _ = await add_destination(client, account, sink.url, transform)
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        async with running(ctx):
            failed = await settled(ctx, made["task"], "failed")
        assert failed["last_error"] == (
            "transform failed: not valid text in the transform's console output "
            "(a lone UTF-16 surrogate such as \\ud800)"
        )
        assert (await delivery_row(ctx, made["task"]))["transform"]["outcome"] == "failed"
        assert sink.requests == []


async def test_a_captured_body_nested_past_the_cap_fails_its_transform_once(ctx: Context, client, account) -> None:
    """A webhook nested 20,000 deep is stored as sent, but handed to no transform: its attempt is a failed
    transform, recorded, the task done. It was a RecursionError that re-leased the attempt every minute
    without end (and held a FIFO line behind it for as long); the next task of the same destination goes."""
    deep = b'{"a":' * 20_000 + b"1" + b"}" * 20_000
    with serving() as sink:
        endpoint, dst, _ = await add_destination(client, account, sink.url, "function handler(r) { return r; }")
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst, body=deep)
        after = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        async with running(ctx):
            failed = await settled(ctx, made["task"], "failed")
            await settled(ctx, after["task"], "succeeded")
        assert failed["last_error"] == (
            "transform failed: the request body nests deeper than 128 levels, more than a transform is given; "
            "nothing was sent"
        )
        assert await has_attempts(ctx, made["task"], 1)
        assert (await delivery_row(ctx, made["task"]))["transform"]["outcome"] == "failed"
        assert len(sink.requests) == 1
