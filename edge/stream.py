"""Writes captured requests to the ingest stream, batching the requests of a moment into one XADD.

Every request awaits ``append``; the first one in starts a writer task, which takes everything pending,
sends one pipeline (one XADD per shard, each entry a msgpack array of records, plus XLEN), and resolves
every waiting request with the outcome. Requests that arrive while a write is in flight form the next
batch, so batches grow with load and latency at low load stays one round trip.

The sender is only answered after its XADD returned: a request is acknowledged once Redis holds it. Each
shard of a batch has its own outcome: on a Redis Cluster a master that fails (or fails over) costs the
requests of its shards a 503, not those of the shards the other masters hold.

Backpressure reads the stream lengths each write returns. Once a shard is over its high-water mark no write
reaches it, so nothing would refresh that reading: while any shard is over, a recount (XLEN of every shard)
runs at most every ``RECOUNT_S``, and the shard takes requests again as soon as the flush has drained it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from edge.cluster import ClusterRespConnection
from edge.resp import Command, RespConnection
from shared.keys import Keys
from shared.wire import IngestRecord, encode_records

__all__ = ("RECOUNT_S", "StreamWriter")

RECOUNT_S = 0.25
"""How stale a shard's over-the-mark reading may get before it is read again."""

log = logging.getLogger("hookyard.edge")


class _Batch(asyncio.Future[None]):
    """The outcome of one write, awaited by every request in it.

    A request whose task is cancelled (its sender hung up) must not cancel its batch-mates' outcome; refusing
    ``cancel`` gives what ``asyncio.shield`` gives (the awaiting task still ends with CancelledError as soon
    as it wakes) without a second future and callback per request.
    """

    def cancel(self, msg: object = None) -> bool:
        return False


class _Shard:
    """One shard's part of the pending batch: its records and the future its requests await."""

    __slots__ = ("done", "records")

    def __init__(self, record: IngestRecord) -> None:
        self.records = [record]
        self.done = _Batch()


def _failed(done: _Batch, exc: BaseException) -> None:
    done.set_exception(exc)
    done.exception()  # retrieved here, so a batch whose senders all left logs no warning


class StreamWriter:
    def __init__(self, redis: RespConnection | ClusterRespConnection, keys: Keys, *, high_water: int) -> None:
        self._redis = redis
        self._keys = keys
        self.high_water = high_water
        self._streams = [keys.ingest_stream(shard).encode() for shard in range(keys.shards)]
        self._pending: dict[int, _Shard] = {}
        """The next write, by shard; each shard's future is shared by its requests."""
        self._writer: asyncio.Task[None] | None = None
        self.backlog = [0] * keys.shards
        """Entries per shard as of the last write or recount; the edge sheds load (503) at the high-water
        mark. Updated in place: the hot path compares it with ``high_water`` itself and calls
        :meth:`over_high_water` only when a shard is at the mark."""
        self._recount: asyncio.Task[None] | None = None
        self._recounted_at = 0.0
        self._recount_failing = False

    def over_high_water(self, shard: int) -> bool:
        if self.backlog[shard] < self.high_water:
            return False
        if self._recount is None and time.monotonic() - self._recounted_at >= RECOUNT_S:
            self._recount = asyncio.create_task(self._count_backlog())
        return True

    async def _count_backlog(self) -> None:
        try:
            replies = await self._redis.execute([(b"XLEN", stream) for stream in self._streams])
            for shard, length in enumerate(replies):
                if isinstance(length, int):
                    self.backlog[shard] = length
            self._recount_failing = False
        except Exception as exc:  # noqa: BLE001 - Redis away: the shard stays shed and the next request retries
            if not self._recount_failing:  # once per outage, not every RECOUNT_S
                log.warning("could not recount the ingest streams (%s); still shedding", exc)
            self._recount_failing = True
        finally:
            self._recounted_at = time.monotonic()
            self._recount = None

    def append(self, shard: int, record: IngestRecord) -> asyncio.Future[None]:
        """The future of the shard's part of the batch, for the caller to await (a plain method: no coroutine
        per request)."""
        pending = self._pending.get(shard)
        if pending is None:
            pending = self._pending[shard] = _Shard(record)
        else:
            pending.records.append(record)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_all())
        return pending.done

    async def _write_all(self) -> None:
        try:
            while self._pending:
                by_shard, self._pending = self._pending, {}
                await self._write(by_shard)
        finally:
            self._writer = None

    async def _write(self, by_shard: dict[int, _Shard]) -> None:
        commands: list[Command] = []
        try:  # encoding inside: whatever fails, every waiter is answered (503), none waits forever
            for shard, pending in by_shard.items():
                stream = self._streams[shard]
                commands.append((b"XADD", stream, b"*", b"r", encode_records(pending.records)))
                commands.append((b"XLEN", stream))
            replies = await self._redis.execute(commands)
        except Exception as exc:  # noqa: BLE001 - every waiter gets the failure and answers 503
            for pending in by_shard.values():
                _failed(pending.done, exc)
            return
        # A shard's XADD reply decides its requests; an error reply (RespError, or a cluster node's
        # ConnectionError) fails that shard's requests only. XLEN only feeds the backpressure reading.
        for i, (shard, pending) in enumerate(by_shard.items()):
            added, length = replies[2 * i], replies[2 * i + 1]
            if isinstance(added, Exception):
                _failed(pending.done, added)
                continue
            if isinstance(length, int):
                self.backlog[shard] = length
            pending.done.set_result(None)
