"""Alert records (alerts, their sends and attempts) are removed by the retention sweep once resolved longer
ago than the instance's retention; an open alert stays however old (its condition still holds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from control.db.context import Context
from control.workers.sweep.loop import Sweep
from shared import ids
from tests.conftest import Account
from tests.helpers import create_endpoint


async def _alert(conn, account_id: str, endpoint_id: str, *, days_ago: float, resolved_days_ago: float | None) -> str:
    fired = datetime.now(UTC) - timedelta(days=days_ago)
    alert_id = ids.new_id("alert", int(fired.timestamp() * 1000))
    resolved = None if resolved_days_ago is None else datetime.now(UTC) - timedelta(days=resolved_days_ago)
    await conn.execute(
        """INSERT INTO alerts (id, account_id, type, condition_key, endpoint_id, fired_at, resolved_at)
           VALUES ($1, $2, 'endpoint.silent', $1, $3, $4, $5)""",
        alert_id,
        account_id,
        endpoint_id,
        fired,
        resolved,
    )
    send_id = f"{alert_id}.adst_x"
    await conn.execute(
        """INSERT INTO alert_sends (id, alert_id, alert_destination_id, url, format, status, attempts)
           VALUES ($1, $2, 'adst_x', 'http://127.0.0.1:9/a', 'json', 'succeeded', 1)""",
        send_id,
        alert_id,
    )
    await conn.execute(
        """INSERT INTO alert_attempts (send_id, attempt, started_at, status, latency_ms, success)
           VALUES ($1, 1, $2, 200, 3, true)""",
        send_id,
        fired,
    )
    return alert_id


async def test_the_sweep_removes_alerts_resolved_past_the_instance_retention(
    client, ctx: Context, account: Account
) -> None:
    ep = (await create_endpoint(client, account.headers))["id"]
    days = ctx.settings.retention_days
    async with ctx.pool.acquire() as conn:
        gone = await _alert(conn, account.id, ep, days_ago=days + 3, resolved_days_ago=days + 2)
        recent = await _alert(conn, account.id, ep, days_ago=1, resolved_days_ago=0.5)
        still_open = await _alert(conn, account.id, ep, days_ago=days + 5, resolved_days_ago=None)
        late = await _alert(conn, account.id, ep, days_ago=days + 5, resolved_days_ago=days - 1)

    await Sweep(ctx).step()

    listed = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert sorted(a["id"] for a in listed) == sorted([recent, still_open, late])
    async with ctx.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM alert_sends WHERE alert_id = $1", gone) == 0
        assert await conn.fetchval("SELECT count(*) FROM alert_attempts WHERE send_id LIKE $1 || '%'", gone) == 0
        kept = [f"{a}.adst_x" for a in (recent, still_open, late)]
        assert await conn.fetchval("SELECT count(*) FROM alert_attempts WHERE send_id = ANY($1::text[])", kept) == 3
