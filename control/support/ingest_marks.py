"""Positions in the ingest streams, and whether the flush has stored everything up to them.

The edge answers 2xx once a record is in its shard's ingest stream; the flush stores it in Postgres later.
Whoever must see every event acknowledged before some moment (an erasure: the events acknowledged before it
was requested) takes ``marks`` at that moment and waits until ``stored_through`` says the flush passed them.

A mark is the stream's ``last-generated-id`` (XINFO STREAM), per shard: every entry the edge added before
the moment has an id at or below it, whether still in the stream or already gone. The flush XACKs and XDELs
an entry only after its records are committed (or its record dead-lettered), so the shard is stored through
its mark when no entry at or below the mark is left in the stream; or, should an XDEL have been lost after
its XACK, when the flush group has read past the mark and none of the entries at or below it is pending.
This is ADR 0036's stream watermark (the group's last delivered entry, held back by its oldest pending one)
read for one mark, with the remaining entries looked at first so that a group recreated after Redis lost
its data, or a stream trimmed by hand, cannot hold a mark back forever.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from shared.keys import FLUSH_GROUP, Keys

__all__ = ("marks", "stored_through")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _missing(exc: ResponseError) -> bool:
    return "no such key" in str(exc).lower()


async def _mark(redis: aioredis.Redis, stream: str) -> str | None:
    try:
        info = await redis.xinfo_stream(stream)
    except ResponseError as exc:
        if _missing(exc):
            return None
        raise
    return _text(info["last-generated-id"])


async def marks(redis: aioredis.Redis, keys: Keys) -> list[str | None]:
    """Per shard (index = shard number): the last entry id its stream generated; None: no stream yet."""
    return [await _mark(redis, stream) for stream in keys.ingest_streams()]


async def _stored(redis: aioredis.Redis, stream: str, mark: str) -> bool:
    if not await redis.xrange(stream, min="-", max=mark, count=1):
        return True
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError as exc:
        if _missing(exc):
            return True
        raise
    group = next((g for g in groups if _text(g["name"]) == FLUSH_GROUP), None)
    if group is None or _order(_text(group["last-delivered-id"])) < _order(mark):
        return False
    return not await redis.xpending_range(stream, FLUSH_GROUP, min="-", max=mark, count=1)


async def stored_through(redis: aioredis.Redis, keys: Keys, stream_marks: list[str | None]) -> int | None:
    """The first shard whose entries up to its mark are not all stored yet; None when every one is. A mark
    of a shard the instance no longer has (fewer shards since) cannot be looked at and is passed."""
    streams = keys.ingest_streams()
    for shard, mark in enumerate(stream_marks):
        if mark is not None and shard < len(streams) and not await _stored(redis, streams[shard], mark):
            return shard
    return None
