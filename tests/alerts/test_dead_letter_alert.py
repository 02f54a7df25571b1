"""``dead_letter.added``: the real flush cannot store a record (Postgres refuses it), the record waits in the
dead letters, and one alert says so, verified by a real receiver with the ``standardwebhooks`` library; more
dead letters while it is open fire nothing more, and re-driving them resolves it."""

from __future__ import annotations

from control.db.context import Context
from control.support import dead_letters
from control.workers.alerts.evaluator import evaluate
from control.workers.flush import Flush
from shared.settings import Settings
from shared.wire import encode_records
from tests.alerts.support import alert_workers, verified
from tests.conftest import Account, ingest_record
from tests.destination import Destination
from tests.helpers import create_endpoint, wait_for

UNSTORABLE = {"source_ip": "not-an-address"}  # inet refuses it: the record's own fault, dead-lettered


async def _flush_poison(ctx: Context, endpoint_id: str, n: int) -> None:
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0)
    await flush.ensure_groups()
    try:
        records = [ingest_record(endpoint_id, **UNSTORABLE) for _ in range(n)]
        await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
        while await flush.step():
            pass
    finally:
        await flush.close()


async def test_a_record_the_flush_cannot_store_raises_one_alert(
    client, ctx: Context, settings: Settings, account: Account, receiver: Destination
) -> None:
    ep = await create_endpoint(client, account.headers, name="orders")
    resp = await client.post("/v1/alert-destinations", json={"url": receiver.url}, headers=account.headers)
    assert resp.status_code == 201, resp.text
    sink = resp.json()
    async with alert_workers(settings, 2, evaluate_every_s=0.2, idle_s=0.05):
        await _flush_poison(ctx, ep["id"], 1)
        assert len(await dead_letters.list_dead_letters(ctx.redis, ctx.keys)) == 1
        (got,) = await receiver.wait_for(1, timeout=30)
        body = verified(got, sink["signing_secret"])
        assert (body["type"], body["data"]["endpoint_id"], body["data"]["dead_letters"]) == (
            "dead_letter.added",
            ep["id"],
            1,
        )
        assert body["data"]["endpoint_name"] == ep["name"]
        await _flush_poison(ctx, ep["id"], 2)  # more while it is open: its count follows, nothing fires
        await wait_for(lambda: _open_count(client, account, 3), timeout=10)
    for _ in range(2):
        await evaluate(ctx)
    assert len(receiver.requests) == 1

    await dead_letters.retry(ctx.redis, ctx.keys)  # re-driven: no longer waiting, the condition ended
    await evaluate(ctx)
    (alert,) = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    assert alert["type"] == "dead_letter.added"
    assert alert["resolved_at"] is not None
    assert alert["id"] == got.headers["webhook-id"]


async def _open_count(client, account: Account, n: int) -> bool:
    alerts = (await client.get("/v1/alerts", headers=account.headers)).json()["alerts"]
    return len(alerts) == 1 and alerts[0]["count"] == n and alerts[0]["resolved_at"] is None
