"""Writes captured requests to the ingest stream, batching the requests of a moment into one XADD.

Every request awaits ``append``; the first one in starts a writer task, which takes everything pending,
sends one pipeline (one XADD per shard, each entry a msgpack array of records, plus XLEN), and resolves
every waiting request with the outcome. Requests that arrive while a write is in flight form the next
batch, so batches grow with load and latency at low load stays one round trip.

The sender is only answered after its XADD returned: a request is acknowledged once Redis holds it.
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from shared.keys import Keys
from shared.wire import IngestRecord, encode_records

__all__ = ("StreamWriter",)


class StreamWriter:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, high_water: int) -> None:
        self._redis = redis
        self._keys = keys
        self._high_water = high_water
        self._pending: list[tuple[int, IngestRecord, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._backlog = [0] * keys.shards
        """Entries per shard as of the last write; the edge sheds load (503) above the high-water mark."""

    def over_high_water(self, shard: int) -> bool:
        return self._backlog[shard] >= self._high_water

    async def append(self, shard: int, record: IngestRecord) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((shard, record, future))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_all())
        await future

    async def _write_all(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                await self._write(batch)
        finally:
            self._writer = None

    async def _write(self, batch: list[tuple[int, IngestRecord, asyncio.Future[None]]]) -> None:
        by_shard: dict[int, list[IngestRecord]] = {}
        for shard, record, _ in batch:
            by_shard.setdefault(shard, []).append(record)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for shard, records in by_shard.items():
                    stream = self._keys.ingest_stream(shard)
                    pipe.xadd(stream, {"r": encode_records(records)})
                    pipe.xlen(stream)
                results = await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - every waiter gets the failure and answers 503
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for i, shard in enumerate(by_shard):
            self._backlog[shard] = int(results[2 * i + 1])
        for _, _, future in batch:
            if not future.done():
                future.set_result(None)
