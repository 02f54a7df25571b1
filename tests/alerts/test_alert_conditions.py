"""Conditions without storms: many failures raise one alert that counts them; the API refuses bad input."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from control.db import alert_conditions
from control.db.context import Context
from control.workers.alerts.evaluator import evaluate
from shared import ids
from shared.settings import Settings
from tests.conftest import Account
from tests.destination import MATCH_ALL, add_destination, add_rule
from tests.events_support import live_app
from tests.helpers import assert_error, create_endpoint
from tests.mcp_client import call, connected
from tests.schemas.support import flush, record


async def test_many_exhausted_deliveries_raise_one_summary_counting_events(
    client, ctx: Context, account: Account
) -> None:
    ep = await create_endpoint(client, account.headers, name="orders")
    async with ctx.pool.acquire() as conn:
        dst = await add_destination(conn, ep["id"], "http://127.0.0.1:9/down")
        rule = await add_rule(conn, ep["id"], [dst], MATCH_ALL)

        async def fail(n: int) -> None:
            for _ in range(n):
                await conn.execute(
                    """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id,
                                                   destination_id, status, attempts)
                       VALUES ($1, $2, $3, now(), $4, $5, 'failed', 10)""",
                    ids.new_id("task"),
                    ep["id"],
                    ids.new_id("evt"),
                    rule,
                    dst,
                )

        await fail(40)
        first = await evaluate(ctx)
        await fail(10)
        second = await evaluate(ctx)
    assert first.ran
    assert len(first.fired) == 1
    assert second.fired == []
    assert second.resolved == []
    (alert,) = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert (alert["type"], alert["destination_id"], alert["count"]) == ("delivery.exhausted", dst, 50)
    # named as their owner named them: a summary read "destination dst_… of endpoint ep_…" alone
    assert (alert["data"]["endpoint_name"], alert["data"]["destination_name"]) == ("orders", "sink")


async def test_alert_destination_input_is_checked_and_scoped(client, account: Account, other_account: Account) -> None:
    bad = await client.post(
        "/v1/alert-destinations", json={"url": "https://example.com/a", "events": ["nope"]}, headers=account.headers
    )
    assert_error(bad, 400, "validation_error", field="events[0]")
    bad = await client.post("/v1/alert-destinations", json={"url": "ftp://example.com"}, headers=account.headers)
    assert_error(bad, 400, "validation_error", field="url")
    made = (
        await client.post("/v1/alert-destinations", json={"url": "https://example.com/a"}, headers=account.headers)
    ).json()
    assert made["signing_secret"].startswith("whsec_")
    assert len(made["events"]) == 7  # every alert type, destination.disabled included
    got = await client.get(f"/v1/alert-destinations/{made['id']}", headers=other_account.headers)
    assert_error(got, 404, "not_found")
    patched = await client.patch(
        f"/v1/alert-destinations/{made['id']}", json={"events": ["endpoint.silent"]}, headers=account.headers
    )
    assert patched.json()["events"] == ["endpoint.silent"]
    assert "signing_secret" not in patched.json()
    rotated = (await client.post(f"/v1/alert-destinations/{made['id']}/rotate-secret", headers=account.headers)).json()
    assert rotated["signing_secret"] != made["signing_secret"]
    gone = await client.delete(f"/v1/alert-destinations/{made['id']}", headers=account.headers)
    assert gone.json() == {"id": made["id"], "deleted": True}


async def test_a_silent_endpoints_last_event_is_written_as_the_api_writes_times(
    client, ctx: Context, account: Account
) -> None:
    """``last_event_at`` (the alert's data and its line) reads as every other time of the API, msgspec's
    ``...31.906230Z`` (no fraction on a whole second); put in jsonb by Postgres it read ``...31.90623+00:00``
    (the fifth fresh-clone trial)."""
    ep = await create_endpoint(client, account.headers, name="quiet")
    event = record(ep["id"], {"type": "invoice.paid"})
    await flush(ctx, [event])
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE endpoints SET expect_event_within_s = 60, created_at = now() - interval '2 minutes' WHERE id = $1",
            ep["id"],
        )
        for ago in (timedelta(seconds=90, microseconds=906230), timedelta(seconds=90)):
            at = await conn.fetchval(
                "UPDATE events SET received_at = date_trunc('second', now()) - $2::interval WHERE id = $1"
                " RETURNING received_at",
                event.id,
                ago,
            )
            (row,) = [r for r in await alert_conditions.silent(conn) if r["endpoint_id"] == ep["id"]]
            assert dict(row["data"])["last_event_at"] == msgspec.json.encode(at).decode().strip('"')
            assert dict(row["data"])["last_event_at"].endswith("Z")


async def test_an_open_circuits_count_and_its_consecutive_failures_agree(
    client, ctx: Context, settings: Settings, account: Account
) -> None:
    """A failed probe of an open circuit adds a consecutive failure: the alert's ``count`` followed it while
    its ``data.consecutive_failures`` kept the figure it fired with (``count: 11``, ``10`` in the trial). Both
    are the current figure, on /v1 and MCP alike."""
    ep = await create_endpoint(client, account.headers, name="probes")
    async with ctx.pool.acquire() as conn:
        dst = await add_destination(conn, ep["id"], "http://127.0.0.1:9/never")
    for failures, circuit in ((10, "open"), (11, "half_open"), (12, "open")):
        async with ctx.pool.acquire() as conn:
            await conn.execute(
                "UPDATE destinations SET circuit = $2, circuit_opened_at = now(), consecutive_failures = $3"
                " WHERE id = $1",
                dst,
                circuit,
                failures,
            )
        assert (await evaluate(ctx)).ran
        (alert,) = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
        assert (alert["count"], alert["data"]["consecutive_failures"]) == (failures, failures), alert
        assert alert["data"]["circuit"] == circuit
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        is_error, listed = await call(mcp, "list_alerts")
    assert not is_error
    assert [(a["count"], a["data"]["consecutive_failures"]) for a in listed["alerts"]] == [(12, 12)]
