"""The stream watermarks a FIFO claim needs (issue 27; docs/adr/0036-delivery-shaping-state.md).

FIFO order is the order events entered the ingest stream (``control.routing.shaping``). The flush commits
entries in batches, and two lanes (or workers) may commit neighbouring batches in either order, so an event
can be stored after a later one of its queue. The head of a queue therefore goes only once every earlier
entry of its shard is committed: the shard's watermark is the flush group's last delivered entry, or its
oldest pending (read but not acknowledged, so maybe not committed) entry when there is one. Entries up to
the watermark were all read before it was taken, and none of them is still pending, so all are committed
(or dead-lettered); the claim that follows sees their tasks. An entry whose records are committed and not
yet acknowledged holds back only its own queue heads, for the moment until the flush acknowledges it.
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from control.db.ordering import entry_position
from shared.keys import FLUSH_GROUP, Keys

__all__ = ("watermarks",)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def _watermark(redis: aioredis.Redis, stream: str) -> str | None:
    """The entry position up to which ``stream`` is committed; None when nothing bounds it (no flush group
    yet: nothing was stored from the stream)."""
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError as exc:
        if "no such key" in str(exc).lower():
            return None
        raise
    group = next((g for g in groups if _text(g["name"]) == FLUSH_GROUP), None)
    if group is None:
        return None
    delivered = entry_position(_text(group["last-delivered-id"]))
    if not group["pending"]:
        return delivered
    # Read after the group: entries acknowledged meanwhile only raise the oldest pending one, and entries
    # read meanwhile lie beyond ``delivered``, so the smaller of the two is safe.
    oldest = (await redis.xpending(stream, FLUSH_GROUP))["min"]
    return delivered if oldest is None else min(delivered, entry_position(_text(oldest)))


async def watermarks(redis: aioredis.Redis, keys: Keys) -> list[str | None]:
    """Per shard (index = shard number): the entry position up to which its stream is committed."""
    return list(await asyncio.gather(*(_watermark(redis, stream) for stream in keys.ingest_streams())))
