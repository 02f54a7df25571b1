"""The one way hookyard processes open a Redis client.

Connections are bounded and a caller waits for a free one: redis-py's default pool raises
``MaxConnectionsError`` the moment more commands are in flight than it may open (100), which is exactly
what a burst does (a cold edge sends one config lookup per request). With a ``BlockingConnectionPool`` the
burst queues for a connection for at most ``pool_timeout_s`` instead, and only a Redis that really cannot
keep up ends in a ``ConnectionError``, which every caller already treats as Redis being unavailable.

TCP-only options (keepalive) are only passed for ``redis://`` / ``rediss://``: redis-py's Unix socket
connection class rejects them at the first command, which would leave an edge unhealthy forever.
"""

from __future__ import annotations

from typing import Any, Final

import redis.asyncio as aioredis

__all__ = ("MAX_CONNECTIONS", "POOL_TIMEOUT_S", "connect")

MAX_CONNECTIONS: Final = 100
"""Connections per client (redis-py's own default cap, now waited for instead of failing past it)."""
POOL_TIMEOUT_S: Final = 2.0
"""Longest wait for a free connection; well under what a webhook sender waits for its answer (5 s and up)."""


def connect(
    url: str,
    *,
    blocking_reads: bool = False,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout_s: float | None = POOL_TIMEOUT_S,
    **options: Any,
) -> aioredis.Redis:
    """``blocking_reads``: no socket timeout, for clients that block in XREADGROUP or pub/sub listens
    (redis-py's default 5 s timeout would break them); their callers bound their own waits.
    ``pool_timeout_s`` ``None`` waits for a connection without limit."""
    if blocking_reads:
        options.setdefault("socket_timeout", None)
    if url.startswith(("redis://", "rediss://")):
        options.setdefault("socket_keepalive", True)
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=pool_timeout_s, **options
    )
    return aioredis.Redis.from_pool(pool)
