"""Flush: ingest stream → Postgres, at least once, never duplicated.

Each step reads a batch of entries from every shard with XREADGROUP (group ``flush``), inserts their
records in one transaction (idempotent on the event id) together with the delivery tasks the routing rules
create for the new ones (``control.routing.route`` decides them, one statement of ``control.db.flush``
inserts both), then XACKs and XDELs them and PUBLISHes one wakeup per endpoint for long-poll waiters. The
order guarantees that an entry leaves the stream only after its events are committed.

Failure handling:
- A failed step (Postgres down) leaves its entries pending for this consumer; the next step re-reads the
  consumer's own pending entries (id ``0``) before taking new ones, so nothing waits for a restart.
- Entries left pending by a dead consumer are taken over with XAUTOCLAIM once idle for ``claim_idle_ms``.
- An entry that cannot be decoded, that a constraint rejects, or that was delivered ``max_deliveries``
  times, goes to the shard's dead-letter stream (kept, never lost) so it cannot block the rest.
- A consumer group that disappeared (Redis restarted without persistence) is recreated.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterable

import asyncpg
import msgspec
from redis.exceptions import ResponseError

from control.db.flush import store_batch
from control.events_text import event_row
from control.routing.route import Router
from control.service import Context
from shared.keys import FLUSH_GROUP
from shared.wire import IngestRecord, decode_records

__all__ = ("Flush",)

log = logging.getLogger("hookyard.worker.flush")

Entry = tuple[str, str, dict[bytes, bytes]]  # (stream, entry id, fields)


class Flush:
    name = "flush"
    idle_s = 0.0  # the blocking XREADGROUP already waited

    def __init__(
        self,
        ctx: Context,
        *,
        consumer: str | None = None,
        count: int = 64,
        block_ms: int = 1000,
        claim_idle_ms: int = 60_000,
        claim_every_s: float | None = None,
        max_deliveries: int = 5,
        router: Router | None = None,
    ) -> None:
        self.ctx = ctx
        self.router = router or Router(ctx)
        self.consumer = consumer or self.default_consumer()
        self.count = count
        self.block_ms = block_ms
        self.claim_idle_ms = claim_idle_ms
        # Looking for abandoned entries more often than they can become claimable would only cost calls.
        self.claim_every_s = claim_idle_ms / 4000 if claim_every_s is None else claim_every_s
        self.max_deliveries = max_deliveries
        self.streams = ctx.keys.ingest_streams()
        self._groups_ready = False
        self._own_pending = True  # at start: finish what this consumer name may have left
        self._next_claim = 0.0

    @staticmethod
    def default_consumer() -> str:
        return f"{socket.gethostname()}-{os.getpid()}"

    async def ensure_groups(self) -> None:
        for stream in self.streams:
            try:
                await self.ctx.redis.xgroup_create(stream, FLUSH_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._groups_ready = True

    async def step(self) -> int:
        if not self._groups_ready:
            await self.ensure_groups()
        try:
            entries, retried = await self._next_entries()
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            log.warning("flush: consumer group missing (Redis lost it?); recreating")
            self._groups_ready = False
            return 0
        if not entries:
            return 0
        if retried:
            entries = await self._dead_letter_exhausted(entries)
        try:
            return await self._process(entries)
        except Exception:
            self._own_pending = True
            raise

    async def _next_entries(self) -> tuple[list[Entry], bool]:
        redis = self.ctx.redis
        if self._own_pending:
            entries = _flatten(
                await redis.xreadgroup(FLUSH_GROUP, self.consumer, dict.fromkeys(self.streams, "0"), count=self.count)
            )
            if entries:
                return entries, True
            self._own_pending = False
        now = time.monotonic()
        if now >= self._next_claim:
            self._next_claim = now + self.claim_every_s
            claimed: list[Entry] = []
            for stream in self.streams:
                _, messages, *_ = await redis.xautoclaim(
                    stream, FLUSH_GROUP, self.consumer, min_idle_time=self.claim_idle_ms, count=self.count
                )
                claimed.extend((stream, _text(eid), fields) for eid, fields in messages if fields)
            if claimed:
                log.info("flush: took over %d entries left by another consumer", len(claimed))
                return claimed, True
        raw = await redis.xreadgroup(
            FLUSH_GROUP, self.consumer, dict.fromkeys(self.streams, ">"), count=self.count, block=self.block_ms
        )
        return _flatten(raw), False

    async def _dead_letter_exhausted(self, entries: list[Entry]) -> list[Entry]:
        keep = []
        for stream in {s for s, _, _ in entries}:
            ids = [eid for s, eid, _ in entries if s == stream]
            ordered = sorted(ids, key=_entry_order)
            pending = await self.ctx.redis.xpending_range(
                stream, FLUSH_GROUP, min=ordered[0], max=ordered[-1], count=len(ids) * 2
            )
            exhausted = {_text(p["message_id"]) for p in pending if p["times_delivered"] > self.max_deliveries}
            for entry in entries:
                if entry[0] != stream:
                    continue
                if entry[1] in exhausted:
                    await self._dead_letter(entry, f"delivered more than {self.max_deliveries} times")
                else:
                    keep.append(entry)
        return keep

    async def _process(self, entries: list[Entry]) -> int:
        decoded: list[tuple[Entry, list[IngestRecord]]] = []
        for entry in entries:
            try:
                decoded.append((entry, decode_records(entry[2][b"r"])))
            except (KeyError, msgspec.MsgspecError) as exc:
                await self._dead_letter(entry, f"undecodable entry: {exc}")
        if not decoded:
            return len(entries)
        try:
            new = await self._insert([r for _, records in decoded for r in records])
        except (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError) as exc:
            log.warning("flush: batch rejected (%s); inserting entry by entry to isolate the bad one", exc)
            new = []
            for entry, records in decoded:
                try:
                    new.extend(await self._insert(records))
                except (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError) as entry_exc:
                    await self._dead_letter(entry, f"rejected by Postgres: {entry_exc}")
                    decoded = [d for d in decoded if d[0] is not entry]
        await self._finish([e for e, _ in decoded], new)
        return sum(len(records) for _, records in decoded)

    async def _insert(self, records: list[IngestRecord]) -> list[tuple[str, str]]:
        """(endpoint id, its new event ids joined with commas) per endpoint with new events."""
        rows = [event_row(r) for r in records]
        async with self.ctx.pool.acquire() as conn, conn.transaction():
            tasks = await self.router.route(conn, rows)  # tasks commit with their events (and NOTIFY then)
            return (await store_batch(conn, rows, tasks)).by_endpoint

    async def _finish(self, entries: Iterable[Entry], new: list[tuple[str, str]]) -> None:
        by_stream: dict[str, list[str]] = {}
        for stream, eid, _ in entries:
            by_stream.setdefault(stream, []).append(eid)
        async with self.ctx.redis.pipeline(transaction=False) as pipe:
            for stream, ids in by_stream.items():
                pipe.xack(stream, FLUSH_GROUP, *ids)
                pipe.xdel(stream, *ids)
            for endpoint_id, event_ids in new:
                pipe.publish(self.ctx.keys.event_channel(endpoint_id), event_ids)
            await pipe.execute()

    async def close(self) -> None:
        await self.router.aclose()

    async def _dead_letter(self, entry: Entry, reason: str) -> None:
        stream, eid, fields = entry
        shard = self.streams.index(stream)
        log.error("flush: entry %s of %s dead-lettered: %s", eid, stream, reason)
        async with self.ctx.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self.ctx.keys.dead_letter_stream(shard), {**fields, b"error": reason.encode(), b"entry": eid})
            pipe.xack(stream, FLUSH_GROUP, eid)
            pipe.xdel(stream, eid)
            await pipe.execute()


def _entry_order(entry_id: str) -> tuple[int, int]:
    """Stream ids compare as (milliseconds, sequence), not as strings ("5-10" comes after "5-9")."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _flatten(response: object) -> list[Entry]:
    """XREADGROUP's ``[[stream, [(id, fields), ...]], ...]`` as flat entries; skips deleted (None) ones."""
    out: list[Entry] = []
    for stream, messages in response or []:  # type: ignore[union-attr]
        name = _text(stream)
        out.extend((name, _text(eid), fields) for eid, fields in messages if fields)
    return out
