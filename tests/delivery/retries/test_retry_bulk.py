"""The bulk retry job of POST /v1/endpoints/{id}/deliveries/retry: thousands of failed deliveries each
retried once within the cap, a sink that comes back up, the filters choosing what is retried, and its errors."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from control.db.context import Context
from control.db.tasks import NOTIFY_CHANNEL
from shared import ids
from shared.settings import Settings
from tests.conftest import make_account
from tests.delivery.retries.support import endpoint_with_destinations
from tests.delivery.retries_support import fail_deliveries, new_tasks, workers
from tests.destination import Destination, Reply, serving
from tests.events_support import Ev
from tests.helpers import assert_error, db, parse_ts, wait_for


async def _job(client: Any, account: Any, job_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/delivery-retries/{job_id}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


async def _completed(client: Any, account: Any, job_id: str, timeout: float = 90) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        job = await _job(client, account, job_id)
        return job if job["state"] == "completed" else None

    return await wait_for(check, timeout=timeout, interval=0.05)


async def test_thousands_of_failed_deliveries_are_each_retried_once_within_the_cap(
    client, account, ctx: Context, destination: Destination
) -> None:
    made = await endpoint_with_destinations(client, account, destination.url)
    count = 2000
    async with db(ctx.settings.database_url) as conn:
        failed = await fail_deliveries(
            conn,
            [Ev(made["endpoint"]) for _ in range(count)],
            destination_id=made["destinations"][0],
            rule_id=made["rules"][0],
            url=destination.url,
        )
    url = f"/v1/endpoints/{made['endpoint']}/deliveries/retry"
    resp = await client.post(url, params={"success": "false"}, headers=account.headers)
    assert resp.status_code == 202, resp.text
    job = resp.json()
    assert (job["state"], job["matched"], job["queued"], job["done"], job["failed"]) == ("scanning", 0, 0, 0, 0)
    assert job["filters"] == {
        "since": None,
        "until": None,
        "provider": None,
        "type": None,
        "method": None,
        "signature_valid": None,
        "q": None,
        "destination_id": None,
        "success": False,
    }
    assert job["id"].startswith("retry_")
    assert job["endpoint_id"] == made["endpoint"]

    destination.hold()  # nothing answers: what is in flight at once is what the cap lets through
    async with workers(ctx, page=500):
        await destination.wait_for(8, timeout=30)
        await wait_for(lambda: _queued_all(client, account, job["id"], count), timeout=30)
        # A sentinel: a task due after every one the job queued, to a destination of another endpoint that
        # answers. The worker claims the oldest due tasks first, so once the sentinel is sent, a ninth request
        # to the capped destination would have been claimed (leased in Postgres) and sent before it.
        with serving() as other:
            await _sentinel(client, account, ctx, other.url)
            await other.wait_for(1, timeout=30)
        assert len(destination.requests) == 8, "more requests in flight to one destination than its cap"
        assert await _leased(ctx, made["destinations"][0]) == 8
        again = await client.post(url, params={"success": "false"}, headers=account.headers)
        assert again.status_code == 200, again.text  # the same job, nothing new started
        assert again.json()["id"] == job["id"]
        destination.release()
        done = await _completed(client, account, job["id"])
    assert (done["matched"], done["queued"], done["done"], done["failed"]) == (count, count, count, 0)
    assert parse_ts(done["completed_at"]) >= parse_ts(done["created_at"])
    sent = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
    assert sent == Counter({f.event_id: 1 for f in failed}), "every delivery exactly once"
    assert {r.headers["x-hookyard-delivery-attempt"] for r in destination.requests} == {"3"}
    async with db(ctx.settings.database_url) as conn:
        statuses = await conn.fetch(
            "SELECT status, count(*) FROM delivery_tasks WHERE endpoint_id = $1 GROUP BY 1", made["endpoint"]
        )
        assert {r["status"]: r["count"] for r in statuses} == {"succeeded": count}
        assert await conn.fetchval("SELECT count(*) FROM delivery_retry_items") == 0

    # Finished: the same request starts a new job, which finds nothing left to retry.
    resp = await client.post(url, params={"success": "false"}, headers=account.headers)
    assert resp.status_code == 202, resp.text
    assert resp.json()["id"] != job["id"]
    async with workers(ctx):
        empty = await _completed(client, account, resp.json()["id"])
    assert (empty["matched"], empty["queued"], empty["done"], empty["failed"]) == (0, 0, 0, 0)


async def test_a_thousand_failures_retried_to_a_sink_that_comes_back_up_each_succeed_once(
    client, account, ctx: Context, destination: Destination, settings: Settings
) -> None:
    """Real failures first (the sink answers 503 until its schedule gives up); the bulk retry starts while
    it is still down, so the circuit opens and holds the rest back; it comes back up, the probe closes the
    circuit, and a second bulk retry takes the few that failed again."""
    made = await endpoint_with_destinations(client, account, destination.url)
    count = 1000
    events = [Ev(made["endpoint"]) for _ in range(count)]
    async with db(ctx.settings.database_url) as conn:
        task_ids = await new_tasks(conn, events, destination_id=made["destinations"][0], rule_id=made["rules"][0])
    destination.reply(default=Reply(status=503))
    # While the schedule runs its course, a circuit that never opens: every task gets its two attempts.
    patient = msgspec.structs.replace(settings, circuit_failure_threshold=1_000_000)
    patient_ctx = dataclasses.replace(ctx, settings=patient)
    async with workers(patient_ctx):
        await wait_for(lambda: _all_failed(ctx, made["endpoint"], count), timeout=90, interval=0.1)
    assert len(destination.requests) == 2 * count
    outage = len(destination.requests)

    url = f"/v1/endpoints/{made['endpoint']}/deliveries/retry"
    first = (await client.post(url, params={"success": "false"}, headers=account.headers)).json()
    async with workers(ctx):
        # Still down: after the circuit opens, the job's attempts wait instead of failing one by one.
        opened_at = await wait_for(lambda: _opened_at(ctx, made["destinations"][0]), timeout=30)
        # Until a probe after the cool-down (0.3 s) failed and opened the circuit again: for that whole while
        # the job's due attempts were held back, where without the circuit they would each have failed.
        await wait_for(lambda: _reopened_after(ctx, made["destinations"][0], opened_at), timeout=30)
        during = len(destination.requests) - outage
        destination.reply(default=Reply(status=200))
        first = await _completed(client, account, first["id"])
        assert first["matched"] == first["queued"] == count
        assert first["done"] + first["failed"] == count
        assert 5 <= first["failed"] < 100, (first, during)  # not a thousand failures
        assert during < 100, (first, during)
        second = (await client.post(url, params={"success": "false"}, headers=account.headers)).json()
        second = await _completed(client, account, second["id"])
    assert (second["matched"], second["queued"], second["done"], second["failed"]) == (
        first["failed"],
        first["failed"],
        first["failed"],
        0,
    )
    # Each task attempted once by the first job (failing while down, or succeeding), the failed ones once more.
    assert len(destination.requests) - outage == count + first["failed"]
    async with db(ctx.settings.database_url) as conn:
        rows = await conn.fetch(
            "SELECT event_id, count(*) FILTER (WHERE success) AS ok FROM deliveries WHERE endpoint_id = $1 GROUP BY 1",
            made["endpoint"],
        )
        statuses = await conn.fetch("SELECT status FROM delivery_tasks WHERE id = any($1::text[])", task_ids)
    assert {r["event_id"]: r["ok"] for r in rows} == {ev.id: 1 for ev in events}, "each succeeded exactly once"
    assert [r["status"] for r in statuses] == ["succeeded"] * count


async def _all_failed(ctx: Context, endpoint_id: str, count: int) -> bool:
    async with db(ctx.settings.database_url) as conn:
        n = await conn.fetchval(
            "SELECT count(*) FROM delivery_tasks WHERE endpoint_id = $1 AND status = 'failed'", endpoint_id
        )
    return n == count


async def _opened_at(ctx: Context, destination_id: str) -> datetime | None:
    """When the destination's circuit opened (or its last probe began), while it is open."""
    async with db(ctx.settings.database_url) as conn:
        row = await conn.fetchrow("SELECT circuit, circuit_opened_at FROM destinations WHERE id = $1", destination_id)
    return row["circuit_opened_at"] if row["circuit"] == "open" else None


async def _reopened_after(ctx: Context, destination_id: str, opened_at: datetime) -> bool:
    """The circuit is open again after a probe that failed: opened later than ``opened_at``."""
    again = await _opened_at(ctx, destination_id)
    return again is not None and again > opened_at


async def _queued_all(client: Any, account: Any, job_id: str, count: int) -> bool:
    """The bulk job queued every one of its ``count`` deliveries (its scan is over)."""
    job = await _job(client, account, job_id)
    return job["queued"] == count and job["state"] != "scanning"


async def _sentinel(client: Any, account: Any, ctx: Context, url: str) -> None:
    """One pending task, due now, to a destination at ``url`` on an endpoint of its own; the deliver worker is
    told (the NOTIFY the flush sends)."""
    made = await endpoint_with_destinations(client, account, url)
    async with db(ctx.settings.database_url) as conn:
        await new_tasks(conn, [Ev(made["endpoint"])], destination_id=made["destinations"][0], rule_id=made["rules"][0])
        await conn.execute(f"NOTIFY {NOTIFY_CHANNEL}")


async def _leased(ctx: Context, destination_id: str) -> int:
    """The destination's tasks claimed by a deliver worker (in flight) in Postgres."""
    async with db(ctx.settings.database_url) as conn:
        return await conn.fetchval(
            "SELECT count(*) FROM delivery_tasks WHERE destination_id = $1 AND status = 'in_flight'", destination_id
        )


async def test_the_filters_choose_what_is_retried(client, account, ctx: Context, destination: Destination) -> None:
    made = await endpoint_with_destinations(client, account, destination.url, destinations=2)
    ep = made["endpoint"]
    day = datetime(2026, 3, 10, tzinfo=UTC)

    def ev(n: int, **fields: Any) -> Ev:
        return Ev(ep, received_at=day + timedelta(hours=n), **fields)

    wanted = [
        ev(1, provider="payments", event_type="charge.refunded", body=b'{"customer": "cus_42"}'),
        ev(2, provider="payments", event_type="charge.refunded", body=b'{"customer": "CUS_42", "x": 1}'),
    ]
    others = [
        ev(3, provider="payments", event_type="charge.refunded", body=b'{"customer": "cus_7"}'),  # q
        ev(4, provider="payments", event_type="charge.succeeded", body=b'{"customer": "cus_42"}'),  # type
        ev(5, provider="commerce", event_type="charge.refunded", body=b'{"customer": "cus_42"}'),  # provider
        ev(30, provider="payments", event_type="charge.refunded", body=b'{"customer": "cus_42"}'),  # until
        Ev(ep, received_at=day - timedelta(hours=1), provider="payments", event_type="charge.refunded",
           body=b'{"customer": "cus_42"}'),  # since
    ]  # fmt: skip
    async with db(ctx.settings.database_url) as conn:
        to_a = await fail_deliveries(
            conn, wanted + others, destination_id=made["destinations"][0], rule_id=made["rules"][0], url=""
        )
        # The same events failed to the other destination too: not retried with destination_id of the first.
        for f in to_a:
            await conn.execute(
                """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id,
                                               status, attempts, last_error)
                   SELECT $1, endpoint_id, event_id, event_received_at, $2, $3, 'failed', 2, 'HTTP 500'
                     FROM delivery_tasks WHERE id = $4""",
                ids.new_id("task"),
                made["rules"][1],
                made["destinations"][1],
                f.task_id,
            )
    params = {
        "success": "false",
        "destination_id": made["destinations"][0],
        "provider": "payments",
        "type": "charge.refunded",
        "q": "cus_42",
        "since": "2026-03-10",
        "until": "2026-03-10",
        "method": "post",
    }
    resp = await client.post(f"/v1/endpoints/{ep}/deliveries/retry", params=params, headers=account.headers)
    assert resp.status_code == 202, resp.text
    assert resp.json()["filters"] == {
        "since": "2026-03-10T00:00:00Z",
        "until": "2026-03-10T23:59:59.999999Z",
        "provider": "payments",
        "type": "charge.refunded",
        "method": "POST",
        "signature_valid": None,
        "q": "cus_42",
        "destination_id": made["destinations"][0],
        "success": False,
    }
    # A filter no event matches: a job of its own (other filters), which completes with nothing.
    none = await client.post(
        f"/v1/endpoints/{ep}/deliveries/retry", params={"signature_valid": "true"}, headers=account.headers
    )
    assert none.status_code == 202, none.text
    async with workers(ctx, page=2):  # pages of two: the cursor is carried across pages
        job = await _completed(client, account, resp.json()["id"])
        nothing = await _completed(client, account, none.json()["id"])
    assert (job["matched"], job["queued"], job["done"], job["failed"]) == (2, 2, 2, 0)
    assert (nothing["matched"], nothing["done"]) == (0, 0)
    assert sorted(r.headers["x-hookyard-event-id"] for r in destination.requests) == sorted(e.id for e in wanted)
    assert {r.target for r in destination.requests} == {"/hook?0"}


async def test_bulk_retry_errors(client, account, other_account, ctx: Context, destination: Destination) -> None:
    made = await endpoint_with_destinations(client, account, destination.url)
    other = await endpoint_with_destinations(client, other_account, destination.url)
    url = f"/v1/endpoints/{made['endpoint']}/deliveries/retry"

    async def post(params: dict[str, str], who: Any = account, endpoint_url: str = url) -> Any:
        return await client.post(endpoint_url, params=params, headers=who.headers)

    for value in ("true", "1", "null", ""):
        assert_error(await post({"success": value}), 400, "validation_error", field="success")
    assert_error(await post({"destination_id": "dst_nope"}), 400, "validation_error", field="destination_id")
    assert_error(await post({"destination_id": "dst_a\x00"}), 400, "validation_error", field="destination_id")
    assert_error(await post({"destination_id": other["destinations"][0]}), 404, "not_found")
    assert_error(await post({"q": "a\x00"}), 400, "validation_error", field="q")
    assert_error(await post({"since": "2026-03-11", "until": "2026-03-10"}), 400, "validation_error", field="until")
    assert_error(await post({"provider": "mail"}), 400, "validation_error", field="provider")
    assert_error(await post({}, other_account), 404, "not_found")
    assert_error(await post({}, endpoint_url="/v1/endpoints/ep_nope/deliveries/retry"), 404, "not_found")
    read_only = await make_account(ctx.settings.database_url, read_only=True)
    assert_error(await post({}, read_only), 403, "forbidden")
    assert_error(await client.post(url), 401, "unauthorized")

    created = (await post({})).json()
    for job_id in ("retry_01KAAAAAAAAAAAAAAAAAAAAAAA", "retry_x", made["endpoint"]):
        assert_error(await client.get(f"/v1/delivery-retries/{job_id}", headers=account.headers), 404, "not_found")
    resp = await client.get(f"/v1/delivery-retries/{created['id']}", headers=other_account.headers)
    assert_error(resp, 404, "not_found")
    assert (await _job(client, account, created["id"]))["id"] == created["id"]
    assert_error(await client.get(f"/v1/delivery-retries/{created['id']}"), 401, "unauthorized")
