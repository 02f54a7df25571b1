"""One account's dead alert destinations never delay another's alerts (issue 42): account A has 19 alert
destinations that accept the connection and never answer (a tarpit) and 20 destinations whose circuits
open; account B's ``destination.circuit_opened`` reaches its receiver about as fast as when B is alone.
A's sends each end at the short alert timeout, and no more of them are in flight at once than the
per-destination and per-account caps allow."""

from __future__ import annotations

import dataclasses
import time

import msgspec
import pytest

from control.db.context import Context
from control.records.endpoints import EndpointCreate
from control.service.alerts import MAX_ALERT_DESTINATIONS
from control.service.endpoints import create_endpoint as create_endpoint_service
from control.workers.alerts.sender import ALERT_TIMEOUT_S, PER_ACCOUNT, PER_DESTINATION
from shared.errors import QuotaExceededError
from shared.settings import Settings
from tests.alerts.support import alert_workers, verified
from tests.conftest import Account
from tests.destination import Destination, add_destination
from tests.helpers import assert_error, create_endpoint, db, wait_for
from tests.schemas.support import principal
from tests.tarpit import tarpit


async def _alert_destination(client, account: Account, url: str) -> dict:
    body = {"url": url, "events": ["destination.circuit_opened"]}
    resp = await client.post("/v1/alert-destinations", json=body, headers=account.headers)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def _open_circuits(ctx: Context, destination_ids: list[str]) -> None:
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE destinations SET circuit = 'open', circuit_opened_at = now(), consecutive_failures = 5"
            " WHERE id = any($1::text[])",
            destination_ids,
        )


async def _one_circuit(client, ctx: Context, account: Account, name: str) -> str:
    ep = await create_endpoint(client, account.headers, name=name)
    async with ctx.pool.acquire() as conn:
        return await add_destination(conn, ep["id"], "http://127.0.0.1:9/never")


async def _arrives(receiver: Destination, count: int, started: float) -> float:
    async def arrived() -> bool:
        return len(receiver.requests) >= count

    await wait_for(arrived, timeout=60)
    return time.monotonic() - started


async def test_a_tarpit_account_never_delays_another_accounts_alert(
    client, ctx: Context, settings: Settings, account: Account, other_account: Account, receiver: Destination
) -> None:
    sink = await _alert_destination(client, other_account, receiver.url)
    first = await _one_circuit(client, ctx, other_account, "b-alone")
    second = await _one_circuit(client, ctx, other_account, "b-beside")

    async with tarpit() as dead, alert_workers(settings, 1, evaluate_every_s=0.5, idle_s=0.1):
        started = time.monotonic()
        await _open_circuits(ctx, [first])
        alone = await _arrives(receiver, 1, started)

        for n in range(19):
            await _alert_destination(client, account, f"{dead}/hook/{n}")
        hostile = [await _one_circuit(client, ctx, account, f"a-{n}") for n in range(20)]
        await _open_circuits(ctx, hostile)
        async with ctx.pool.acquire() as conn:  # A's 380 sends exist and the sender is stuck on its tarpits

            async def flooded() -> bool:
                return await conn.fetchval(
                    """SELECT count(*) >= 380 AND count(*) FILTER (WHERE status = 'in_flight') > 0
                         FROM alert_sends"""
                )

            await wait_for(flooded, timeout=20)

            started = time.monotonic()
            await _open_circuits(ctx, [second])
            beside = await _arrives(receiver, 2, started)

            most = await conn.fetchrow(
                """SELECT max(n) AS destination FROM (SELECT count(*) AS n FROM alert_sends
                    WHERE status = 'in_flight' GROUP BY alert_destination_id) d"""
            )
            in_flight = await conn.fetchval(
                """SELECT count(*) FROM alert_sends s JOIN alerts a ON a.id = s.alert_id
                    WHERE s.status = 'in_flight' AND a.account_id = $1""",
                account.id,
            )
        print(f"B's alert alone {alone:.2f} s, beside A's tarpits {beside:.2f} s")
        assert beside < alone + 3.0, (alone, beside)
        assert most["destination"] <= PER_DESTINATION
        assert in_flight <= PER_ACCOUNT

        # A's sends end at the alert timeout, recorded as failed attempts to be retried.
        async with ctx.pool.acquire() as conn:

            async def timed_out() -> bool:
                return await conn.fetchval("SELECT count(*) FROM alert_attempts WHERE NOT success") >= PER_ACCOUNT

            await wait_for(timed_out, timeout=ALERT_TIMEOUT_S * 4)
            slowest = await conn.fetchval("SELECT max(latency_ms) FROM alert_attempts WHERE NOT success")
        assert slowest <= (ALERT_TIMEOUT_S + 1.5) * 1000

    bodies = [verified(r, sink["signing_secret"]) for r in receiver.requests]
    assert [b["data"]["destination_id"] for b in bodies] == [first, second]


async def test_alert_destinations_past_the_quota_are_a_403_quota_exceeded(client, account, other_account) -> None:
    for n in range(MAX_ALERT_DESTINATIONS):
        await _alert_destination(client, account, f"http://127.0.0.1:9/{n}")
    resp = await client.post("/v1/alert-destinations", json={"url": "http://127.0.0.1:9/x"}, headers=account.headers)
    error = assert_error(resp, 403, "quota_exceeded")
    assert f"quota of {MAX_ALERT_DESTINATIONS} alert destinations" in error["message"]
    await _alert_destination(client, other_account, "http://127.0.0.1:9/theirs")  # another account's own quota


async def test_a_registered_account_without_its_own_quota_has_the_default(ctx: Context, account, database_url) -> None:
    bounded = dataclasses.replace(ctx, settings=msgspec.structs.replace(ctx.settings, endpoint_quota=2))
    me = principal(account.id)
    for n in range(2):
        await create_endpoint_service(bounded, me, EndpointCreate(name=f"ep{n}"))
    with pytest.raises(QuotaExceededError, match="quota of 2 endpoints") as refused:
        await create_endpoint_service(bounded, me, EndpointCreate(name="third"))
    assert refused.value.code == "quota_exceeded"
    async with db(database_url) as conn:  # an account's own quota wins over the default
        await conn.execute("UPDATE accounts SET endpoint_quota = 3 WHERE id = $1", account.id)
    await create_endpoint_service(bounded, me, EndpointCreate(name="third"))
    unbounded = dataclasses.replace(ctx, settings=msgspec.structs.replace(ctx.settings, endpoint_quota=0))
    async with db(database_url) as conn:
        await conn.execute("UPDATE accounts SET endpoint_quota = NULL WHERE id = $1", account.id)
    await create_endpoint_service(unbounded, me, EndpointCreate(name="fourth"))
