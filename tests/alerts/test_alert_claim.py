"""Leasing alert sends (``control.db.alerts.claim``) from several workers at once: a send is leased by one of
them, never by two. Real Postgres, claims on separate connections racing each other."""

from __future__ import annotations

import asyncio
from collections import Counter

from control.db import alerts as db_alerts
from control.db.context import Context
from tests.conftest import Account

SENDS = 40
ROUNDS = 20
WORKERS = 4


async def _sends(ctx: Context, account: Account, n: int) -> None:
    """``n`` due sends of one alert, each to an alert destination of its own (no cap holds them back)."""
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO alerts (id, account_id, type, condition_key) VALUES ('al_race', $1, 'endpoint.silent', 'k')",
            account.id,
        )
        await conn.execute(
            """INSERT INTO alert_destinations (id, account_id, url, events, signing_secret)
               SELECT 'ad_' || i, $1, 'http://127.0.0.1:9/', '{endpoint.silent}', 'sealed'
                 FROM generate_series(1, $2) i""",
            account.id,
            n,
        )
        await conn.execute(
            """INSERT INTO alert_sends (id, alert_id, alert_destination_id, url, format)
               SELECT 'as_' || i, 'al_race', 'ad_' || i, 'http://127.0.0.1:9/', 'json' FROM generate_series(1, $1) i""",
            n,
        )


async def _lease(conn, delay_s: float) -> list[str]:
    await asyncio.sleep(delay_s)
    rows = await db_alerts.claim(conn, limit=SENDS, lease_s=30, per_destination=2, per_account=SENDS)
    return [r["id"] for r in rows]


async def test_sends_leased_by_racing_workers_go_to_one_of_them(ctx: Context, account: Account) -> None:
    """The race of the double alert (``test_dead_letter_alert`` once got two): a worker whose snapshot saw a
    send pending locks it after another leased and committed it. Before the fix 218 to 491 of the 800 leases
    here were a second lease of a leased send; the starts are a little apart so that one commits while the
    next is still choosing."""
    await _sends(ctx, account, SENDS)
    conns = [await ctx.pool.acquire() for _ in range(WORKERS)]
    twice = 0
    try:
        for _ in range(ROUNDS):
            async with ctx.pool.acquire() as conn:
                await conn.execute("UPDATE alert_sends SET status = 'pending', attempts = 0, lease_expires_at = NULL")
            leased = await asyncio.gather(*(_lease(c, 0.0005 * i) for i, c in enumerate(conns)))
            counts = Counter(i for ids in leased for i in ids)
            twice += sum(1 for n in counts.values() if n > 1)
    finally:
        for conn in conns:
            await ctx.pool.release(conn)
    assert twice == 0, twice
