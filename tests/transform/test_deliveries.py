"""Rule deliveries through a destination's transform: a real deliver worker, loopback destinations, rows and
destinations written through /v1. The two worked examples of the docs run here as written there."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import msgspec
import pytest
import standardwebhooks

from control.db import tasks as db_tasks
from control.db.context import Context
from control.transform.pool import pool_for
from control.workers.deliver import Deliver
from shared.settings import Settings
from tests.conftest import Servers
from tests.destination import FAST_DELIVERY, fetch_row, make_task, running, serving, settled, task_status
from tests.helpers import create_endpoint, refusing_connections, wait_for
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


async def _destination(client, account, url: str, transform: str | None) -> tuple[str, str, str]:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": url, "transform": transform}, headers=account.headers
    )
    assert resp.status_code == 201, resp.text
    assert resp.json()["transform"] == transform
    return endpoint, resp.json()["id"], resp.json()["signing_secret"]


async def _attempts(ctx: Context, task_id: str, count: int) -> bool:
    row = await fetch_row(ctx, "SELECT count(*) AS n FROM deliveries WHERE task_id = $1", task_id)
    return row["n"] == count


async def _delivery(ctx: Context, task_id: str) -> dict:
    row = await fetch_row(
        ctx,
        "SELECT request_body, success, response_status, error, transform FROM deliveries WHERE task_id = $1",
        task_id,
    )
    return dict(row)


async def test_a_slack_shaped_body_is_sent_and_signed_as_sent(ctx: Context, client, account, destination) -> None:
    endpoint, dst, secret = await _destination(client, account, destination.url, SLACK)
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    expected = {"text": f"invoice.paid: in_42 ({made['event']})"}
    assert msgspec.json.decode(got.body) == expected
    assert got.headers["content-type"] == "application/json"
    # hookyard's signature is over the body the transform returned, not the captured one
    assert standardwebhooks.Webhook(secret).verify(got.body, got.headers) == expected
    row = await _delivery(ctx, made["task"])
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
    endpoint, dst, _ = await _destination(client, account, destination.url + "/hooks?v=1", REROUTE)
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
    endpoint, dst, _ = await _destination(client, account, destination.url, INVOICES_ONLY)
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
    row = await _delivery(ctx, skipped["task"])
    assert (row["success"], row["response_status"], row["request_body"]) == (True, None, None)
    assert row["transform"]["outcome"] == "skipped"
    assert (await _delivery(ctx, invoice["task"]))["transform"]["logs"] == ["forwarding invoice.paid"]
    assert len(destination.requests) == 1  # the skipped one never went out


async def test_a_body_left_as_handed_in_goes_out_as_captured(ctx: Context, client, account, destination) -> None:
    """V8 holds numbers as doubles: a body the transform does not touch is told unchanged by its JSON in V8, not
    by what came back, and goes out as the captured bytes, digits past 2^53, spacing and escapes kept."""
    endpoint, dst, _ = await _destination(client, account, destination.url, INVOICES_ONLY)
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
    endpoint, dst, _ = await _destination(client, account, destination.url, broken)
    made = [await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst) for _ in range(5)]
    async with running(ctx):
        done = [await settled(ctx, m["task"], "failed") for m in made]
        assert {(d["attempts"], d["last_error"]) for d in done} == {
            (1, "transform failed: TypeError: Cannot read properties of undefined (reading 'id') (line 2)")
        }
        circuit = await fetch_row(ctx, "SELECT circuit FROM destinations WHERE id = $1", dst)
        assert circuit["circuit"] == "closed"  # 5 failures, threshold 3: the destination was never tried
        row = await _delivery(ctx, made[0]["task"])
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
        endpoint, spinning, _ = await _destination(client, account, slow_sink.url, "function handler() { for (;;) {} }")
        transform = "function handler(r) { r.headers['x-ok'] = '1'; return r; }"
        other, healthy, _ = await _destination(client, other_account, fast_sink.url, transform)
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
    endpoint, dst, _ = await _destination(client, account, destination.url, "function handler() { return null; }")
    resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": None}, headers=account.headers)
    assert resp.json()["transform"] is None
    made = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=dst, body=STRIPE_BODY)
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, made["task"], "succeeded")
    assert got.body == STRIPE_BODY
    assert (await _delivery(ctx, made["task"]))["transform"] is None


async def test_a_transform_that_ends_its_process_fails_alone_and_is_marked(
    ctx: Context, client, account, other_account
) -> None:
    """The worker keeps delivering another account's destination; the crashing transform is marked on its
    destination, not run again until a retry asks or its code changes (``FATAL``: a V8 fatal error within
    milliseconds of the call, never killed for time instead)."""
    crash = FATAL
    with serving() as bad_sink, serving() as good_sink:
        endpoint, bad, _ = await _destination(client, account, bad_sink.url, crash)
        other, good, _ = await _destination(client, other_account, good_sink.url, None)
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
            await wait_for(lambda: _attempts(ctx, second["task"], 2))  # the retry ran the transform again
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
        endpoint, dst, _ = await _destination(client, account, sink.url, transform)
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        async with running(ctx):
            failed = await settled(ctx, made["task"], "failed")
        assert failed["last_error"] == (
            "transform failed: not valid text in the transform's console output "
            "(a lone UTF-16 surrogate such as \\ud800)"
        )
        assert (await _delivery(ctx, made["task"]))["transform"]["outcome"] == "failed"
        assert sink.requests == []


async def test_a_captured_body_nested_past_the_cap_fails_its_transform_once(ctx: Context, client, account) -> None:
    """A webhook nested 20,000 deep is stored as sent, but handed to no transform: its attempt is a failed
    transform, recorded, the task done. It was a RecursionError that re-leased the attempt every minute
    without end (and held a FIFO line behind it for as long); the next task of the same destination goes."""
    deep = b'{"a":' * 20_000 + b"1" + b"}" * 20_000
    with serving() as sink:
        endpoint, dst, _ = await _destination(client, account, sink.url, "function handler(r) { return r; }")
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst, body=deep)
        after = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        async with running(ctx):
            failed = await settled(ctx, made["task"], "failed")
            await settled(ctx, after["task"], "succeeded")
        assert failed["last_error"] == (
            "transform failed: the request body nests deeper than 128 levels, more than a transform is given; "
            "nothing was sent"
        )
        assert await _attempts(ctx, made["task"], 1)
        assert (await _delivery(ctx, made["task"]))["transform"]["outcome"] == "failed"
        assert len(sink.requests) == 1


RUNAWAY = "function handler(r) { for (;;) {} }"
STUCK = "transform failed: stopped: still running after 1 s"


async def _failed_once(ctx: Context, task_id: str, error: str) -> None:
    """The task failed on its one attempt, with one delivery record of a failed transform saying ``error``."""
    done = await task_status(ctx, task_id)
    assert (done["status"], done["attempts"], done["last_error"]) == ("failed", 1, error)
    assert await _attempts(ctx, task_id, 1)
    assert (await _delivery(ctx, task_id))["transform"]["outcome"] == "failed"


async def _four(ctx: Context, client, account, url: str, source: str) -> tuple[str, str, list[dict[str, str]]]:
    """A destination of ``source`` and 4 deliveries to it, due before the worker starts: claimed together."""
    endpoint, dst, _ = await _destination(client, account, url, source)
    return endpoint, dst, [await make_task(ctx, url, endpoint_id=endpoint, destination_id=dst) for _ in range(4)]


async def _all_failed(ctx: Context, made: list[dict[str, str]]) -> None:
    await asyncio.gather(*(settled(ctx, m["task"], "failed", timeout=30) for m in made))


async def test_runaway_deliveries_claimed_together_all_settle(ctx: Context, client, account) -> None:
    """4 runaway transforms of one destination, claimed together (one batch of the pool): each failed once and
    recorded within seconds. They stayed in flight for ever: their results came after the window a claimed
    task has to start in, and were handed back and claimed again, each time the same (issue 42)."""
    with serving() as sink:
        _, _, made = await _four(ctx, client, account, sink.url, RUNAWAY)
        async with running(ctx):
            await _all_failed(ctx, made)
        for m in made:
            await _failed_once(ctx, m["task"], STUCK)
        assert sink.requests == []


async def test_runaway_deliveries_one_after_another_all_settle(ctx: Context, client, account) -> None:
    """4 runaway deliveries of one destination, each made once the one before settled: the pool slows the
    destination's calls from its third stop (strikes), so the fourth's result comes 2 s after its claim, past
    the 1.5 s it has to start in. It was handed back and claimed again for ever, each time with a longer wait."""
    with serving() as sink:
        endpoint, dst, _ = await _destination(client, account, sink.url, RUNAWAY)
        async with running(ctx):
            for _ in range(4):
                made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
                await settled(ctx, made["task"], "failed", timeout=15)
                await _failed_once(ctx, made["task"], STUCK)
        assert sink.requests == []


SLOW_FATAL = FATAL.replace("{", "{ const t = Date.now(); while (Date.now() - t < 300) {}", 1)
"""Ends its process 0.3 s into each call: a batch of 4 and each call again alone in a process of its own take
~2.5 s, past the 1.5 s a claimed task has to start in, without coming near a limit of time."""


async def test_deliveries_claimed_together_that_each_end_their_process_are_recorded_as_such(
    ctx: Context, client, account
) -> None:
    """4 deliveries whose transform ends its sandbox process, claimed together: each call is run alone in a
    process of its own, and each delivery is recorded with the crash it caused (its process's end), not as
    "not run". Their results came past the window to start in, they were handed back, and the next claim
    found the destination marked crashed: each delivery said its transform was not run (issue 42)."""
    with serving() as sink:
        _, dst, made = await _four(ctx, client, account, sink.url, SLOW_FATAL)
        async with running(ctx):
            await _all_failed(ctx, made)
        for m in made:
            done = await task_status(ctx, m["task"])
            assert done["attempts"] == 1
            assert done["last_error"].startswith("transform failed: stopped: the transform ended its sandbox process")
            assert await _attempts(ctx, m["task"], 1)
        shown = (await client.get(f"/v1/destinations/{dst}", headers=account.headers)).json()
        assert shown["transform_crashed_at"] is not None
        assert sink.requests == []


SLOW_THROW = """function handler(r) {
  const t = Date.now();
  while (Date.now() - t < 600) {}
  throw new Error("slow and wrong");
}"""


async def test_a_claims_slow_calls_that_send_nothing_are_recorded_not_handed_back(
    ctx: Context, client, account
) -> None:
    """No call runs away here: 4 calls of 0.6 s each, whose batch V8 stops at 1 s and runs again call by
    call, so their results come ~3.4 s after the claim, past the 1.5 s a claimed task has to start in (a
    5 s lease, a 2 s send). They send nothing, so the window, kept for a send within the lease, is not
    theirs: each is recorded once. They were handed back, and every claim of them did the same again."""
    with serving() as sink:
        _, _, made = await _four(ctx, client, account, sink.url, SLOW_THROW)
        async with running(ctx):
            await _all_failed(ctx, made)
        for m in made:
            await _failed_once(ctx, m["task"], "transform failed: Error: slow and wrong (line 4)")
        assert sink.requests == []


async def test_a_patched_transform_runs_at_once_after_runaways(ctx: Context, client, account) -> None:
    """The pool slows down a destination whose calls keep being stopped (strikes: 4 in a row wait 2 s before
    the next call), keyed by the destination and its code's digest: the code PATCHed in place of the runaway
    runs its next delivery at once, not after the old code's wait."""
    with serving() as sink:
        endpoint, dst, made = await _four(ctx, client, account, sink.url, RUNAWAY)
        async with running(ctx):
            await _all_failed(ctx, made)
            fixed = "function handler(r) { r.headers['x-fixed'] = '1'; return r; }"
            resp = await client.patch(f"/v1/destinations/{dst}", json={"transform": fixed}, headers=account.headers)
            assert resp.status_code == 200, resp.text
            started = time.time()
            after = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
            (got,) = await sink.wait_for(1)
            await settled(ctx, after["task"], "succeeded")
        assert got.headers["x-fixed"] == "1"
        assert got.at - started < 1.5  # the old key's wait: BACKOFF_S * 2 ** (4 - STRIKES_FREE) = 2 s


SLOW_OK = """function handler(r) {
  const t = Date.now();
  while (Date.now() - t < 900) {}
  r.headers["x-slow"] = "1";
  return r;
}"""


async def test_a_claims_slow_calls_that_send_are_each_delivered_once(ctx: Context, client, account) -> None:
    """4 calls of 0.9 s each, claimed together, all succeeding: their batch V8 stops at 1 s and runs again call
    by call, so their results come ~4.6 s after the claim, past the 1.5 s a claimed task has to start in.
    Their leases are renewed and each is sent once, with one delivery record. They were handed back, their
    results dropped, and every claim of them did the same again: never delivered (issue 42)."""
    with serving() as sink:
        _, _, made = await _four(ctx, client, account, sink.url, SLOW_OK)
        async with running(ctx):
            got = await sink.wait_for(4, timeout=20)
            await asyncio.gather(*(settled(ctx, m["task"], "succeeded", timeout=10) for m in made))
        assert len(sink.requests) == 4
        assert all(r.headers["x-slow"] == "1" for r in got)
        for m in made:
            assert (await task_status(ctx, m["task"]))["attempts"] == 1
            assert await _attempts(ctx, m["task"], 1)


async def test_a_late_task_swept_meanwhile_is_not_renewed_and_sends_nothing(ctx: Context, client, account) -> None:
    """Two tasks claimed together, transformed ahead, and too late to start: each is leased again only if it is
    still this worker's. The one whose lease ran out and was swept and claimed by another worker meanwhile is
    left to that worker (its lease untouched) and its result dropped; only the other is renewed and sent."""
    with serving() as sink:
        tagged = "function handler(r) { r.headers['x-tagged'] = '1'; return r; }"
        endpoint, dst, _ = await _destination(client, account, sink.url, tagged)
        made = [await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst) for _ in range(2)]
        worker = Deliver(ctx)
        try:
            async with ctx.pool.acquire() as conn:
                ask = db_tasks.Claim(free=2, window=16, blocked=[], room={}, per_destination=2, lease_s=60)
                claimed, *_ = await db_tasks.claim_ready(conn, ask)
                assert sorted(t.id for t in claimed) == sorted(m["task"] for m in made)
                await worker.transforms.ahead(claimed)
                kept, taken = claimed
                assert all(worker.transforms.sends_ahead(t) for t in claimed)
                await conn.execute(
                    "UPDATE delivery_tasks SET lease_expires_at = now() - interval '1 s' WHERE id = $1", taken.id
                )
                assert await db_tasks.sweep_expired(conn, max_attempts=5, exclude=[kept.id]) == 1
                (again,) = await db_tasks.lease(conn, [taken.id], lease_s=60)  # another worker's claim
                assert again.attempts == taken.attempts + 1
                before = await conn.fetchrow("SELECT lease_expires_at FROM delivery_tasks WHERE id = $1", taken.id)
                worker.returns.stale(list(claimed))
                await worker.returns.wait()
                assert not worker.transforms.sends_ahead(taken)
                after = await conn.fetchrow(
                    "SELECT status, attempts, lease_expires_at FROM delivery_tasks WHERE id = $1", taken.id
                )
                assert (after["status"], after["attempts"]) == ("in_flight", again.attempts)
                assert after["lease_expires_at"] == before["lease_expires_at"]
            await settled(ctx, kept.id, "succeeded")
            assert await _attempts(ctx, kept.id, 1)
            assert await _attempts(ctx, taken.id, 0)
        finally:
            await worker.close()
        (sent,) = sink.requests
        assert sent.headers["x-tagged"] == "1"
        assert sent.headers["x-hookyard-event-id"] == next(m["event"] for m in made if m["task"] == kept.id)


async def test_a_late_tasks_renewal_in_an_outage_loses_nothing(
    ctx: Context, client, account, servers: Servers, database_url: str
) -> None:
    """A late task with a transformed request whose renewal cannot reach Postgres: nothing is sent and
    nothing held, its result is dropped, and once its lease has run out it is swept and delivered once."""
    with serving() as sink:
        tagged = "function handler(r) { r.headers['x-tagged'] = '1'; return r; }"
        endpoint, dst, _ = await _destination(client, account, sink.url, tagged)
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        worker = Deliver(ctx)
        try:
            async with ctx.pool.acquire() as conn:
                ask = db_tasks.Claim(free=1, window=16, blocked=[], room={}, per_destination=1, lease_s=1)
                claimed, *_ = await db_tasks.claim_ready(conn, ask)
            await worker.transforms.ahead(claimed)
            assert worker.transforms.sends_ahead(claimed[0])
            async with refusing_connections(servers, database_url):
                worker.returns.stale(list(claimed))
                await worker.returns.wait()
                assert worker.ready.count == 0
                assert not worker.transforms.sends_ahead(claimed[0])
        finally:
            await worker.close()
        assert sink.requests == []
        await ctx.pool.expire_connections()  # their backends were ended: none met again mid-protocol
        async with running(ctx):
            (sent,) = await sink.wait_for(1, timeout=15)
            await settled(ctx, made["task"], "succeeded")
        assert sent.headers["x-tagged"] == "1"
        assert len(sink.requests) == 1
        assert await _attempts(ctx, made["task"], 1)
