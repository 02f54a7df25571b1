"""The one way hookyard processes open a Redis client.

TCP-only options (keepalive) are only passed for ``redis://`` / ``rediss://``: redis-py's Unix socket
connection class rejects them at the first command, which would leave an edge unhealthy forever.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

__all__ = ("connect",)


def connect(url: str, *, blocking_reads: bool = False, **options: Any) -> aioredis.Redis:
    """``blocking_reads``: no socket timeout, for clients that block in XREADGROUP or pub/sub listens
    (redis-py's default 5 s timeout would break them); their callers bound their own waits."""
    if blocking_reads:
        options.setdefault("socket_timeout", None)
    if url.startswith(("redis://", "rediss://")):
        options.setdefault("socket_keepalive", True)
    return aioredis.Redis.from_url(url, **options)
