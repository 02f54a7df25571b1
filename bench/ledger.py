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

from collections import Counter
from dataclasses import asdict, dataclass

import asyncpg
import redis.asyncio as aioredis

from bench.chaos import Load, Topology
from bench.quiet import wait_quiet
from shared.keys import Keys

__all__ = ("Ledger", "settle")

_KEYS = Keys("hy:")
"""The topology's keys: the default prefix, one ingest shard."""


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
        dead = await redis.xlen(_KEYS.dead_letter_stream(0))
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


async def settle(top: Topology, load: Load, *, timeout_s: float) -> Ledger:
    """Counts once nothing more can change the count (``bench.quiet``), or once ``timeout_s`` passed: every
    entry the stopped load added to the ingest stream stored (or dead-lettered) and every delivery task
    finished, so late extra deliveries are counted too. Events acknowledged and never stored (Redis restarted
    without persistence) are then known to be lost; the caller judges ``lost`` against its own bound."""
    await wait_quiet(top.database_url, top.redis.url, _KEYS, timeout_s=timeout_s)
    return await _count(top, load)
