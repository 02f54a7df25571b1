"""One account's share of a deliver worker (docs/adr/0093-a-fair-share-of-the-deliver-loop.md): a hostile account
whose destinations never answer holds at most ``deliver_account_share`` of the slots, so a normal account beside
it is delivered promptly; and when both have work, a claim takes the accounts in turns, not oldest first."""

from __future__ import annotations

import asyncio
import time

import msgspec

from control.db.context import Context
from control.db.leased import LeasedTask
from control.delivery.claim import claim
from control.delivery.shares import Accounts
from control.workers.main import worker_context
from shared.settings import Settings
from tests.destination import Destination, add_destination, add_endpoint, make_task, running, settled
from tests.helpers import wait_for
from tests.tarpit import tarpit

TUNED = {
    "deliver_concurrency": 16,
    "deliver_per_destination": 4,
    "deliver_timeout_s": 6.0,
    "deliver_lease_s": 20.0,
    "deliver_drain_s": 0.2,
}
"""Five hanging destinations at 4 each (20) would hold all 16 slots; the share (0.75) leaves 4 to the others."""


async def _hostile(ctx: Context, url: str, destinations: int, each: int) -> list[str]:
    """One account with ``destinations`` destinations to ``url``, ``each`` due tasks per destination."""
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        ids = [await add_destination(conn, endpoint_id, url) for _ in range(destinations)]
    return [
        (await make_task(ctx, url, endpoint_id=endpoint_id, destination_id=d))["task"] for _ in range(each) for d in ids
    ]


async def _another(ctx: Context, first: dict[str, str], url: str) -> str:
    """Another task of ``first``'s endpoint and destination."""
    task = await make_task(ctx, url, endpoint_id=first["endpoint"], destination_id=first["destination"])
    return task["task"]


async def test_a_hanging_account_leaves_slots_to_another(settings: Settings, destination: Destination) -> None:
    """Account B: five destinations that never answer and a backlog; account A, beside it, sends to a quick sink.
    B holds its share of the slots (12 of 16), not all of them, and A's deliveries finish well within the send
    timeout (6 s) that B's sends wait out. Before the share, B held all 16 and each of A's waited ~6 s."""
    tuned = msgspec.structs.replace(settings, **TUNED)
    async with tarpit() as url, worker_context(tuned) as ctx, running(ctx) as worker:
        await _hostile(ctx, url, destinations=5, each=20)

        async def b_holds_its_share() -> bool:
            return worker.in_flight >= 12

        await wait_for(b_holds_its_share, timeout=10, interval=0.01)
        started = time.monotonic()
        first = await make_task(ctx, destination.url)
        latencies = [(await settled(ctx, first["task"], "succeeded", timeout=15), time.monotonic())[1] - started]
        for _ in range(5):
            started = time.monotonic()
            task = await make_task(
                ctx, destination.url, endpoint_id=first["endpoint"], destination_id=first["destination"]
            )
            await settled(ctx, task["task"], "succeeded", timeout=15)
            latencies.append(time.monotonic() - started)
        print(f"A's deliveries beside B's tarpits: {', '.join(f'{x:.2f}' for x in latencies)} s")
        assert max(latencies) < 2.0, latencies  # the poll (0.2 s) and a claim, not B's 6 s timeout
        assert worker.in_flight <= 12, worker.in_flight  # A's are done: B's alone


async def test_an_account_alone_holds_its_share_and_no_more(settings: Settings) -> None:
    """Alone on the worker, the hanging account takes its whole share at once (12 of 16 slots) and never more."""
    tuned = msgspec.structs.replace(settings, **TUNED)
    async with tarpit() as url, worker_context(tuned) as ctx, running(ctx) as worker:
        await _hostile(ctx, url, destinations=5, each=10)
        seen = 0

        async def full_share() -> bool:
            nonlocal seen
            seen = max(seen, worker.in_flight + worker.ready.count)
            return seen >= 12

        await wait_for(full_share, timeout=10, interval=0.01)
        await asyncio.sleep(1.0)  # several claims later (the poll is 0.2 s)
        assert worker.in_flight + worker.ready.count == 12


async def _claim(ctx: Context, accounts: Accounts | None = None) -> list[LeasedTask]:
    async with ctx.pool.acquire() as conn:
        taken, _ = await claim(
            conn,
            free=10,
            in_flight={},
            per_destination=32,
            blocked=[],
            lease_s=30.0,
            cooldown_s=30.0,
            accounts=accounts,
        )
    return taken


async def test_a_claim_takes_the_accounts_in_turns(settings: Settings, destination: Destination) -> None:
    """B's 12 tasks are older than A's 4; a claim of 10 takes A's 4 beside 6 of B's (oldest first within each),
    where oldest first overall took B's 10. An account's room bounds it; a blocked account is not even a
    candidate."""
    async with worker_context(settings) as ctx:
        b_tasks = await _hostile(ctx, destination.url, destinations=3, each=4)
        first = await make_task(ctx, destination.url)
        a_tasks = [first["task"]]
        for _ in range(3):
            a = await make_task(
                ctx, destination.url, endpoint_id=first["endpoint"], destination_id=first["destination"]
            )
            a_tasks.append(a["task"])
        taken = await _claim(ctx)
        ids = {t.id for t in taken}
        assert set(a_tasks) <= ids
        assert len(ids & set(b_tasks)) == 6
        assert [t.id for t in taken if t.id in b_tasks] == b_tasks[:6]  # B's oldest
        a_account = next(t.account_id for t in taken if t.id in a_tasks)
        b_account = next(t.account_id for t in taken if t.id in b_tasks)
        assert a_account != b_account
        more = await _claim(ctx, Accounts(room={b_account: 3}, per_account=100))
        assert len(more) == 3
        assert {t.account_id for t in more} == {b_account}
        assert await _claim(ctx, Accounts(blocked=[b_account])) == []
