"""The one way hookyard processes open a Redis client, on one Redis or on a Redis Cluster.

Connections are bounded and a caller waits for a free one: redis-py's default pool raises
``MaxConnectionsError`` the moment more commands are in flight than it may open (100), which is exactly
what a burst does (a cold edge sends one config lookup per request). With a ``BlockingConnectionPool`` the
burst queues for a connection for at most ``pool_timeout_s`` instead, and only a Redis that really cannot
keep up ends in a ``ConnectionError``, which every caller already treats as Redis being unavailable.

TCP-only options (keepalive) are only passed for ``redis://`` / ``rediss://``: redis-py's Unix socket
connection class rejects them at the first command, which would leave an edge unhealthy forever.

Cluster: ``REDIS_URL`` may name any node of a Redis Cluster. :func:`open_client` asks the server
(``INFO cluster``) and then returns redis-py's ``RedisCluster``, which finds the other nodes, keeps the slot
map and follows MOVED/ASK. Its per-node pools cannot wait for a free connection (they raise past the cap), so
the cap is set well above what a burst holds (``CLUSTER_MAX_CONNECTIONS``). A cluster needs Redis 7 or later:
the edge config notices use sharded pub/sub (:func:`publish_counted`).

A worker may start before Redis answers (both restarted at once, a slow boot, a Redis restarting under it):
:func:`open_client_when_up` waits for it with a capped backoff, as the worker loops wait out any later
outage, instead of exiting and leaving the stream unflushed until someone restarts the process.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import redis
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.cluster import RedisCluster
from redis.driver_info import DriverInfo

from shared.errors import ConfigError

__all__ = (
    "CLUSTER_MAX_CONNECTIONS",
    "MAX_CONNECTIONS",
    "POOL_TIMEOUT_S",
    "connect",
    "is_cluster",
    "is_cluster_client",
    "open_client",
    "open_client_when_up",
    "publish_counted",
)

log = logging.getLogger("hookyard.redis")

MAX_CONNECTIONS: Final = 100
"""Connections per client (redis-py's own default cap, now waited for instead of failing past it)."""
POOL_TIMEOUT_S: Final = 2.0
"""Longest wait for a free connection; well under what a webhook sender waits for its answer (5 s and up)."""
CLUSTER_MAX_CONNECTIONS: Final = 1000
"""Connections per cluster node and client: redis-py's cluster pools raise instead of waiting past it."""


def connect(
    url: str,
    *,
    blocking_reads: bool = False,
    max_connections: int = MAX_CONNECTIONS,
    pool_timeout_s: float | None = POOL_TIMEOUT_S,
    cluster: bool = False,
    **options: Any,
) -> aioredis.Redis:
    """``blocking_reads``: no socket timeout, for clients that block in XREADGROUP or pub/sub listens
    (redis-py's default 5 s timeout would break them); their callers bound their own waits.
    ``pool_timeout_s`` ``None`` waits for a connection without limit. ``cluster``: the URL names a node of a
    Redis Cluster (:func:`open_client` finds that out)."""
    options.setdefault("driver_info", _driver_info())
    if blocking_reads:
        options.setdefault("socket_timeout", None)
    if url.startswith(("redis://", "rediss://")):
        options.setdefault("socket_keepalive", True)
    if cluster:
        options.pop("client_name", None)  # set per connection by redis-py's plain clients only
        return RedisCluster.from_url(  # type: ignore[return-value]  # callers use only the commands both share
            url, max_connections=max(max_connections, CLUSTER_MAX_CONNECTIONS), **options
        )
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=pool_timeout_s, **options
    )
    return aioredis.Redis.from_pool(pool)


def _driver_info() -> DriverInfo:
    """What CLIENT SETINFO tells the server, with the version given: redis-py 8 otherwise reads its own
    package metadata from disk for every connection it makes (1.8 ms each measured, several per client)."""
    return DriverInfo(name="redis-py", lib_version=redis.__version__)


async def is_cluster(url: str) -> bool:
    """Whether the server at ``url`` is a node of a Redis Cluster (``cluster_enabled:1``); a cluster older
    than Redis 7 is refused with a ``ConfigError`` (no sharded pub/sub)."""
    client = aioredis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5, driver_info=_driver_info())
    try:
        info = await client.info("cluster")
        if not int(info.get("cluster_enabled", 0)):
            return False
        version = str((await client.info("server")).get("redis_version", "0"))
    finally:
        await client.aclose()
    if int(version.split(".")[0]) < 7:
        raise ConfigError(f"REDIS_URL names a Redis Cluster of version {version}; hookyard needs Redis 7 or later")
    return True


async def open_client(url: str, **options: Any) -> aioredis.Redis:
    """:func:`connect`, to a cluster when the server says it is one."""
    return connect(url, cluster=await is_cluster(url), **options)


async def open_client_when_up(url: str, *, cap_s: float = 5.0, **options: Any) -> aioredis.Redis:
    """:func:`open_client`, once Redis answers: unreachable, it is asked again after 0.1 s, doubling up to
    ``cap_s``, each failure logged as one line (without the URL, which may hold a password). Refused
    credentials are not waited out: they end the start as before."""
    delay = 0.1
    while True:
        try:
            return await open_client(url, **options)
        except redis.exceptions.AuthenticationError:  # a ConnectionError to redis-py, but no wait mends it
            raise
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            log.warning("Redis unreachable (%s: %s); asking again in %.1fs", type(exc).__name__, exc, delay)
        await asyncio.sleep(delay)
        delay = min(cap_s, delay * 2)


def is_cluster_client(client: object) -> bool:
    return isinstance(client, RedisCluster)


async def publish_counted(client: aioredis.Redis, channel: str, message: bytes) -> int:
    """Publishes and returns how many subscribers got the message.

    On a cluster PUBLISH reaches every node but counts only the receiving node's subscribers; a sharded
    channel (SPUBLISH, listeners SSUBSCRIBE) lives on the node owning its slot, so its count is all of them."""
    if is_cluster_client(client):
        return int(await client.spublish(channel, message))
    return int(await client.publish(channel, message))
