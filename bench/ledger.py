"""The fault ledger: what was sent and acknowledged against what was stored and delivered.

- ``sent``: requests the load made; ``acked``: answered 200 with an event id (the promise);
- ``stored``: events whose body id (idempotency key) was acked; ``lost``: acked but never stored;
- ``duplicated``: stored rows beyond one per acked body id (the flush must never store one twice);
- ``delivered``: acked events the sink received at least once; ``undelivered``: acked, never received;
- ``extra``: sink requests beyond one per event (deliveries are at least once: a send whose result could
  not be recorded, e.g. its worker was killed mid-request, is sent again);
- ``unacked_stored``: stored although the sender saw no 200 (the answer was lost, say the edge died after
  the write): not a promise broken, the sender retries and the receiver deduplicates;
- ``dead_letters``: records the flush set aside.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import asdict, dataclass

import asyncpg
import redis.asyncio as aioredis

from bench.chaos import Load, Topology
from shared.keys import Keys

__all__ = ("Ledger", "settle")

POLL_S = 0.2
"""How often ``settle`` counts: fast, so a settled ledger is seen within a fifth of a second, not a second."""
STILL_S = 1.0
"""How long the count must hold still (twice that when some loss is allowed) before it is final: the
stillness is measured in time, not in polls, so polling faster does not shorten it."""


@dataclass(frozen=True)
class Ledger:
    sent: int
    acked: int
    stored: int
    lost: int
    duplicated: int
    delivered: int
    undelivered: int
    extra: int
    unacked_stored: int
    dead_letters: int

    def line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in asdict(self).items())


async def _count(top: Topology, load: Load) -> Ledger:
    acked_events = set(load.acked.values())
    conn = await asyncpg.connect(top.database_url)
    try:
        rows = await conn.fetch(
            "SELECT id, idempotency_key FROM events WHERE id = ANY($1::text[]) OR idempotency_key LIKE $2",
            list(acked_events),
            f"pay\\_{load.run_id}\\_%",
        )
    finally:
        await conn.close()
    stored_ids = {r["id"] for r in rows}
    per_key = Counter(r["idempotency_key"] for r in rows if r["idempotency_key"])
    sink = Counter(top.sink_file.read_text().split()) if top.sink_file.exists() else Counter()
    redis = aioredis.Redis.from_url(top.redis.url)
    try:
        dead = await redis.xlen(Keys("hy:").dead_letter_stream(0))
    finally:
        await redis.aclose()
    return Ledger(
        sent=load.sent,
        acked=len(acked_events),
        stored=len(acked_events & stored_ids),
        lost=len(acked_events - stored_ids),
        duplicated=sum(n - 1 for n in per_key.values()),
        delivered=sum(1 for event_id in acked_events if event_id in sink),
        undelivered=sum(1 for event_id in acked_events if event_id not in sink),
        extra=sum(sink[event_id] - 1 for event_id in stored_ids if sink[event_id] > 1),
        unacked_stored=len(stored_ids - acked_events),
        dead_letters=dead,
    )


async def settle(top: Topology, load: Load, *, timeout_s: float, may_lose: int = 0) -> Ledger:
    """Counts once everything acknowledged is stored and delivered (or ``timeout_s`` passed), and nothing
    moved for a moment, so late extra deliveries are counted too.

    ``may_lose``: acknowledged events a scenario is allowed to lose (Redis restarted without persistence
    loses what its stream held). With fewer lost than that and every stored event delivered, the count is
    final once it held still for ``2 * STILL_S``, instead of waiting ``timeout_s`` for events that can no
    longer come; the caller still judges ``lost`` against its own bound."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while True:
        ledger = await _count(top, load)
        now = time.monotonic()
        if ledger != last:
            last, since = ledger, now
        everything = ledger.lost == 0 and ledger.undelivered == 0
        within = 0 < ledger.lost <= may_lose and ledger.undelivered == ledger.lost  # the lost can't be delivered
        held = now - since
        if (everything and held >= STILL_S) or (within and held >= 2 * STILL_S) or now > deadline:
            return ledger
        await asyncio.sleep(POLL_S)
