"""Flush: ingest stream → Postgres, at least once, never duplicated, nothing acknowledged lost.

Each step reads a batch of entries from every shard with XREADGROUP (group ``flush``), inserts their
records in one transaction (idempotent on the event id) together with the delivery tasks the routing rules
create for the new ones (``control.routing.route`` decides them, one statement of ``control.db.flush``
inserts both), then XACKs and XDELs them and PUBLISHes one wakeup per endpoint for long-poll waiters. An
entry leaves the stream only after its records are committed. Schema learning is not done here: the same
statement notes the new events, and the learn worker learns them (``control.workers.learn``, ADR 0041).

Failure handling; ``control.db.faults`` says whose fault a failure is:

- **Infrastructure** (Postgres or Redis unreachable, refusing connections, restarting, killing backends,
  timing out; anything not recognised as the data's fault): the batch stays with this consumer, in memory,
  and the step is retried with the loop's capped, jittered backoff for as long as the outage lasts. The
  batch is not read again from Redis meanwhile (Redis counts every read as a delivery), and its entries'
  idle time is reset with ``XCLAIM ... JUSTID`` (which counts nothing), so no other consumer takes over a
  batch that is being waited on. An outage never dead-letters anything. Once the records are committed
  only the acknowledgement is retried, so a Redis outage after the commit repeats no insert.
- **A record Postgres refuses** (``faults.is_record_fault``): the batch is split in halves until the single
  record is found; every other record is stored, and only that one goes to its shard's dead-letter stream,
  in the same MULTI that acknowledges its entry (``control.support.dead_letters``: visible, re-drivable).
- **An entry that cannot be decoded** goes to the dead letters whole.
- Entries left pending by a consumer that died are taken over (XAUTOCLAIM) once idle for ``claim_idle_ms``.
- A consumer group that disappeared (Redis restarted without persistence) is recreated; a batch held in
  memory meanwhile is still stored.

On a Redis Cluster every shard lives in its own slot, and one XREADGROUP may name only keys of one slot: the
lane keeps one blocking read per shard in flight (each on its shard's node) and a step takes what the reads
that finished returned; the others keep waiting into the next step, so a quiet shard delays no other. A
step whose reads failed re-reads this consumer's own pending entries first, so nothing a failed step's
sibling reads delivered waits for a takeover.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import msgspec
from redis.exceptions import RedisError, ResponseError

from control.db.context import Context
from control.db.faults import describe, is_record_fault
from control.db.flush import store_batch
from control.records.storable import EventRow, event_row
from control.routing.route import Router
from control.support import activity
from control.support.dead_letters import fields_for, record_fields
from control.support.metrics import DEAD_LETTERED, FLUSH_BATCH, FLUSH_SECONDS
from control.workers.flush_tracing import BatchSpan, RoutingSpans
from shared import redis_client
from shared.keys import FLUSH_GROUP
from shared.tracing import trace_ids
from shared.wire import IngestRecord, decode_records

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT, StreamIdT, XReadGroupResponse

__all__ = ("Flush",)

_first, _second = itemgetter(0), itemgetter(1)
"""A batch's (entry, record) pairs taken apart in C: the flush handles every event of a batch so, and a Python
step per event in each of these lists was about 2 % of the worker's CPU in ``bench pipeline`` (ADR 0091)."""

log = logging.getLogger("hookyard.worker.flush")

Entry = tuple[str, str, dict[bytes, bytes]]  # (stream, entry id, fields)


@dataclass(slots=True)
class _Batch:
    """What one step works on, kept across failed attempts until it is acknowledged."""

    entries: list[Entry]
    held_since: float
    """Monotonic time the entries' idle time was last reset (read or XCLAIM)."""
    records: list[tuple[Entry, IngestRecord]] = field(default_factory=list)
    dead: list[tuple[Entry, dict[FieldT, EncodableT]]] = field(default_factory=list)
    """(entry, dead-letter fields) to write together with the acknowledgement."""
    new: list[tuple[str, str]] | None = None
    """Set once the records are committed: (endpoint id, its new event ids joined with commas)."""
    span: BatchSpan | None = None
    """The batch's span, when tracing is on (``control.workers.flush_tracing``)."""
    traces: dict[str, tuple[str, str]] = field(default_factory=dict)
    """(trace id, span id) of each new event's routing span, when it was recorded: for the activity lines."""


class Flush:
    name = "flush"
    idle_s = 0.0  # the blocking XREADGROUP already waited

    def __init__(
        self,
        ctx: Context,
        *,
        consumer: str | None = None,
        count: int = 64,
        block_ms: int = 250,
        claim_idle_ms: int = 60_000,
        claim_every_s: float | None = None,
        router: Router | None = None,
        learn: bool = False,
    ) -> None:
        self.ctx = ctx
        self.router = router or Router(ctx)
        self.learn = learn
        """Note each batch's new events for schema learning (``control.workers.learn`` learns them)."""
        self.consumer = consumer or self.default_consumer()
        self.count = count
        self.block_ms = block_ms
        """How long an idle read blocks: also how long a stop waits for it (the step in progress finishes), so
        short, as ``hookyard up`` stops within 3 s; an arriving entry answers the read at once all the same."""
        self.claim_idle_ms = claim_idle_ms
        # Looking for abandoned entries more often than they can become claimable would only cost calls.
        self.claim_every_s = claim_idle_ms / 4000 if claim_every_s is None else claim_every_s
        self.streams = ctx.keys.ingest_streams()
        self._groups_ready = False
        self._own_pending = True  # at start: finish what this consumer name may have left
        self._next_claim = 0.0
        self._held: _Batch | None = None
        self._cluster = redis_client.is_cluster_client(ctx.redis)
        self._reads: dict[str, asyncio.Task[XReadGroupResponse]] = {}
        """Cluster: the blocking XREADGROUP in flight per shard stream."""

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
        batch = self._held
        if batch is None:
            if not self._groups_ready:
                await self.ensure_groups()
            try:
                entries = await self._next_entries()
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                log.warning("flush: consumer group missing (Redis lost it?); recreating")
                self._groups_ready = False
                return 0
            if not entries:
                return 0
            batch = self._held = _Batch(entries, time.monotonic())
            self._decode(batch)
            if self.ctx.tracing is not None:
                batch.span = BatchSpan(self.ctx.tracing, [r for _, r in batch.records], len(entries))
        else:
            await self._keep(batch)
        if batch.new is None:
            batch.new = await self._store(batch)
        await self._finish(batch)
        self._held = None
        if batch.span is not None:
            new = sum(ids.count(",") + 1 for _, ids in batch.new)
            batch.span.end(stored=len(batch.records), new=new, dead=len(batch.dead))
        if activity.enabled(self.ctx.settings.log_activity):
            # One join and split in C, not a Python step per event (the lines take at most 20 of them).
            new_ids = set(",".join([ids for _, ids in batch.new]).split(",")) if batch.new else set()
            activity.stored((r for _, r in batch.records), new_ids, batch.traces)
        FLUSH_BATCH.observe(len(batch.records) + len(batch.dead))
        FLUSH_SECONDS.observe(time.monotonic() - batch.held_since)
        if batch.dead:
            DEAD_LETTERED.inc((), len(batch.dead))
        return len(batch.records) + len(batch.dead)

    async def _next_entries(self) -> list[Entry]:
        redis = self.ctx.redis
        count = self.count
        if self._own_pending:
            if self._cluster:  # one slot per command
                entries = []
                for stream in self.streams:
                    entries += _flatten(await redis.xreadgroup(FLUSH_GROUP, self.consumer, {stream: "0"}, count=count))
            else:
                entries = _flatten(
                    await redis.xreadgroup(FLUSH_GROUP, self.consumer, dict.fromkeys(self.streams, "0"), count=count)
                )
            if entries:
                return entries
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
                return claimed
        if self._cluster:
            return await self._next_new_per_shard()
        raw = await redis.xreadgroup(
            FLUSH_GROUP, self.consumer, dict.fromkeys(self.streams, ">"), count=self.count, block=self.block_ms
        )
        return _flatten(raw)

    async def _next_new_per_shard(self) -> list[Entry]:
        """Cluster: what the shard reads that finished returned; the unfinished ones stay in flight."""
        redis, count = self.ctx.redis, self.count
        for stream in self.streams:
            if stream not in self._reads:
                read = redis.xreadgroup(FLUSH_GROUP, self.consumer, {stream: ">"}, count=count, block=self.block_ms)
                self._reads[stream] = asyncio.ensure_future(read)
        await asyncio.wait(self._reads.values(), return_when=asyncio.FIRST_COMPLETED)
        entries: list[Entry] = []
        failure: BaseException | None = None
        for stream, reading in list(self._reads.items()):
            if not reading.done():
                continue
            del self._reads[stream]
            if reading.exception() is not None:
                failure = failure or reading.exception()
            else:
                entries += _flatten(reading.result())
        if failure is not None:
            # What the other reads delivered is pending on this consumer: the next step reads it first.
            self._own_pending = True
            raise failure
        return entries

    def _decode(self, batch: _Batch) -> None:
        for entry in batch.entries:
            raw = entry[2].get(b"r", b"")
            try:
                batch.records.extend(zip(repeat(entry), decode_records(raw)))  # pairs made in C, not a generator
            except msgspec.MsgspecError as exc:
                batch.dead.append((entry, fields_for(raw, f"undecodable entry: {exc}", entry[1])))

    async def _keep(self, batch: _Batch) -> None:
        """Resets the idle time of a batch being retried, so no XAUTOCLAIM takes it from a live consumer.

        ``JUSTID`` claims do not count as deliveries. A failure here is ignored: Redis is then away, and
        nobody can take the entries either."""
        if (time.monotonic() - batch.held_since) * 1000 < self.claim_idle_ms / 3:
            return
        try:
            for stream in {s for s, _, _ in batch.entries}:
                ids: list[StreamIdT] = [eid for s, eid, _ in batch.entries if s == stream]
                await self.ctx.redis.xclaim(stream, FLUSH_GROUP, self.consumer, 0, ids, justid=True)
            batch.held_since = time.monotonic()
        except (RedisError, OSError) as exc:
            log.debug("flush: could not refresh the hold on %d entries (%s)", len(batch.entries), exc)

    async def _store(self, batch: _Batch) -> list[tuple[str, str]]:
        """Commits every storable record; a record Postgres refuses joins ``batch.dead``."""
        new: list[tuple[str, str]] = []
        refused: list[tuple[tuple[Entry, IngestRecord], BaseException]] = []
        await self._insert_isolating(batch.records, new, refused, batch)
        for (entry, record), exc in refused:
            reason = f"rejected by Postgres: {describe(exc)}"
            log.error(
                "flush: event %s of endpoint %s dead-lettered, %s",
                record.id,
                record.endpoint_id,
                reason,
                extra={"event_id": record.id, "endpoint_id": record.endpoint_id, **trace_ids(record.traceparent)},
            )
            batch.dead.append((entry, record_fields(record, reason, entry[1])))
        if refused:
            gone = {id(pair[1]) for pair, _ in refused}
            batch.records = [pair for pair in batch.records if id(pair[1]) not in gone]
        return new

    async def _insert_isolating(
        self,
        records: list[tuple[Entry, IngestRecord]],
        new: list[tuple[str, str]],
        refused: list[tuple[tuple[Entry, IngestRecord], BaseException]],
        batch: _Batch,
    ) -> None:
        """One transaction for the lot; when the data is at fault, halves until the bad records are alone.

        An infrastructure failure propagates (the caller's batch is retried whole, and what committed before
        it is simply found again: inserts are idempotent)."""
        if not records:
            return
        try:
            new.extend(await self._insert(list(map(_second, records)), list(map(_first, records)), batch))
            return
        except Exception as exc:
            if not is_record_fault(exc):
                raise
            if len(records) == 1:
                refused.append((records[0], exc))
                return
            log.warning("flush: %d records rejected together (%s); isolating the bad one", len(records), describe(exc))
        middle = len(records) // 2
        await self._insert_isolating(records[:middle], new, refused, batch)
        await self._insert_isolating(records[middle:], new, refused, batch)

    async def _insert(self, records: list[IngestRecord], entries: list[Entry], batch: _Batch) -> list[tuple[str, str]]:
        """(endpoint id, its new event ids joined with commas) per endpoint with new events. ``entries``: the
        stream entry of each record (a FIFO destination's tasks keep their place in the stream)."""
        rows: Sequence[EventRow] = list(map(event_row, records))
        traced = RoutingSpans(self.ctx.tracing, batch.span) if self.ctx.tracing is not None else None
        try:
            async with self.ctx.pool.acquire() as conn, conn.transaction():
                rows, tasks = await self.router.route(conn, rows, entries)  # labelled; tasks commit with their events
                if traced is not None:  # each event's routing span; its tasks carry its context
                    rows, tasks = traced.routed(rows, tasks)
                # The new events are noted for learning in this transaction: each is learned once, elsewhere.
                stored = await store_batch(conn, rows, tasks, learn=self.learn)
        except BaseException as exc:
            if traced is not None:
                traced.failed(exc)
            raise
        if traced is not None:
            batch.traces.update(traced.committed(i for _, ids in stored.by_endpoint for i in ids.split(",")))
        return stored.by_endpoint

    async def _finish(self, batch: _Batch) -> None:
        """Acknowledges the batch; its dead letters go in the same MULTI as their shard's acknowledgement."""
        by_stream: dict[str, list[str]] = {}
        for stream, eid, _ in batch.entries:
            by_stream.setdefault(stream, []).append(eid)
        dead_by_stream: dict[str, list[dict[FieldT, EncodableT]]] = {}
        for (stream, _, _), fields in batch.dead:
            dead_by_stream.setdefault(stream, []).append(fields)
        redis, keys = self.ctx.redis, self.ctx.keys
        try:
            for stream, fields_list in dead_by_stream.items():
                async with redis.pipeline(transaction=True) as pipe:
                    dead_stream = keys.dead_letter_stream(self.streams.index(stream))
                    for fields in fields_list:
                        pipe.xadd(dead_stream, fields)
                    pipe.xack(stream, FLUSH_GROUP, *by_stream[stream])
                    pipe.xdel(stream, *by_stream.pop(stream))
                    pipe.xlen(dead_stream)
                    total = (await pipe.execute())[-1]
                log.warning(
                    "flush: %d dead letters wait in %s; see `hookyard dead-letters list`, then `retry`",
                    total,
                    dead_stream,
                )
            async with redis.pipeline(transaction=False) as pipe:
                for stream, ids in by_stream.items():
                    pipe.xack(stream, FLUSH_GROUP, *ids)
                    pipe.xdel(stream, *ids)
                for endpoint_id, event_ids in batch.new or ():
                    if self._cluster:  # a cluster pipeline refuses publish(); the command itself is routed
                        pipe.execute_command("PUBLISH", keys.event_channel(endpoint_id), event_ids)
                    else:
                        pipe.publish(keys.event_channel(endpoint_id), event_ids)
                await pipe.execute()
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # Redis lost the stream and its group while this batch was held: the records are committed
            # (and the dead letters, if any, were lost with Redis); there is nothing left to acknowledge.
            log.warning("flush: consumer group gone while %d entries were held; they are stored", len(batch.entries))
            self._groups_ready = False

    async def close(self) -> None:
        # A read cancelled here may still have been served: its entries wait, pending, for a takeover.
        for read in self._reads.values():
            read.cancel()
        if self._reads:
            await asyncio.wait(self._reads.values())
            self._reads.clear()
        await self.router.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _flatten(response: Iterable[Any] | None) -> list[Entry]:
    """XREADGROUP's ``[[stream, [(id, fields), ...]], ...]`` (RESP2, as the clients are made) as flat entries;
    skips deleted (None) ones. None: a blocking read that timed out."""
    out: list[Entry] = []
    for stream, messages in response or []:
        name = _text(stream)
        out.extend((name, _text(eid), fields) for eid, fields in messages if fields)
    return out
