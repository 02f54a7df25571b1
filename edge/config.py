"""The edge's in-process view of endpoint configs: a cache over Redis, invalidated over pub/sub.

Control writes ``EdgeEndpoint`` records under ``Keys.endpoint_config(token)`` and then publishes a
``ConfigNotice`` on ``Keys.config_channel``; every edge node's listener drops the tokens it names (``*``
drops all) and confirms on the notice's ack key, and control answers the API call only once every listener
confirmed. So a request that arrives after a change's 2xx is served under the change.

That holds only while the listener is subscribed: while it is not (at start, after Redis dropped it, or
when a PING goes unanswered), nothing is served from the cache and every request reads Redis itself.
Concurrent misses of one token share one Redis GET (a task; the others await it, and its failure reaches
them all), so a cold edge answers a burst with one lookup per token, not one per request. A notice detaches
the lookups in flight for its tokens, so no request that arrives after it gets what was read before.

On a Redis Cluster the channel is a sharded one (SSUBSCRIBE; control SPUBLISHes, whose receiver count,
unlike PUBLISH's, is every listener: ``shared.redis_client.publish_counted``). When its slot moves, Redis
unsubscribes the listener; that ends the subscription like a lost connection, so the listener has redis-py
reload the slot map and starts over on the channel's new node.

A token is unknown only while Redis holds every config: after a restart without its data, until the sweep
has rebuilt them (``Keys.config_marker``), a miss raises ``ConfigsIncompleteError`` and the request gets a
503 to retry, not a 404 that some senders never retry. Unknown tokens (and tombstones of deleted endpoints)
are cached too, as ``None``, so a flood of bad tokens
costs one Redis GET each per TTL, not one per request. The TTL is only a safety net. Expiry is wall-clock
time (``time.time()``), the clock the hot path reads anyway for the event's timestamp, so a cache hit costs
one dict lookup and no clock call of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import MovedError, RedisError

from edge.trust import ServedEndpoint
from shared.errors import ConfigsIncompleteError
from shared.keys import CONFIGS_COMPLETE, Keys
from shared.redis_client import is_cluster_client
from shared.wire import decode_config_notice, decode_edge_endpoint

__all__ = ("ACK_TTL_S", "EndpointCache")

log = logging.getLogger("hookyard.edge")

_ENTRY_BYTES = 512
"""An entry's own objects (the tuple, the served endpoint's fixed fields, the dict slot)."""
_CONFIG_BYTES_PER_BYTE = 4
"""A decoded config's Python objects per byte of its stored form (an estimate: strings, lists, a Struct)."""

ACK_TTL_S = 60
"""Life of an ack list: control deletes it once it has its acks; this only clears lists nobody waits on."""


class EndpointCache:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        ttl_s: float = 30.0,
        max_entries: int = 100_000,
        max_bytes: int = 64 * 1024 * 1024,
        ping_every_s: float = 5.0,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._ping_every_s = ping_every_s
        self.entries: dict[str, tuple[ServedEndpoint | None, float, int]] = {}
        """token → (config or None for an unknown token, expiry as ``time.time()``, weight in bytes). The hot
        path reads it directly; it is cleared and updated in place, never replaced, and empty while not
        listening."""
        self.max_bytes = max_bytes
        self.nbytes = 0
        """What the entries weigh: past ``max_bytes`` (or ``max_entries``) the cache starts over. A config is
        the tenant's (allowlists, secrets, signature settings), so its size, not the count, is the bound."""
        self._inflight: dict[str, asyncio.Task[ServedEndpoint | None]] = {}
        # Bumped on every invalidation: a lookup that started before one must not store what it read.
        self._generation = 0
        self._sharded = is_cluster_client(redis)
        self.listening = asyncio.Event()
        """Set while the listener is subscribed; only then is anything cached or shared."""

    async def get(self, token: str) -> ServedEndpoint | None:
        """The config serving ``token``; None for an unknown (or empty) token or a deleted endpoint.

        Raises what the Redis client raises when the lookup fails (every request sharing it gets it), and
        ``ConfigsIncompleteError`` for a miss while the configs are being rebuilt.
        """
        if not token:
            return None
        entry = self.entries.get(token)
        if entry is not None and entry[1] > time.time():
            return entry[0]
        if not self.listening.is_set():
            # No notice would tell a lookup in flight that it went stale: each request reads for itself.
            return await self._lookup(token)
        task = self._inflight.get(token)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._lookup(token), name="edge-config-lookup")
            self._inflight[token] = task
            task.add_done_callback(functools.partial(self._landed, token))
        # Shielded: a request that gives up (its sender went away) does not cancel the others' lookup.
        return await asyncio.shield(task)

    async def _lookup(self, token: str) -> ServedEndpoint | None:
        generation = self._generation
        raw = await self._redis.get(self._keys.endpoint_config(token))
        if raw is None:  # only a miss pays the reads below, and only until the miss is cached
            if await self._redis.get(self._keys.config_marker) != CONFIGS_COMPLETE:
                raise ConfigsIncompleteError("no config for the token while Redis holds no complete set of them")
            # The miss may predate a rebuild that completed before the marker was read (the sweep writes every
            # config, then the marker): only a miss read after a complete marker means an unknown token.
            raw = await self._redis.get(self._keys.endpoint_config(token))
        config = None
        if raw is not None:
            try:
                endpoint = decode_edge_endpoint(raw)
                config = None if endpoint.deleted else ServedEndpoint(endpoint, self._keys)
            except (msgspec.MsgspecError, ValueError):
                log.error("edge config of a token is unreadable; serving it as unknown until control rewrites it")
        if generation == self._generation and self.listening.is_set():
            weight = _ENTRY_BYTES + len(token) + _CONFIG_BYTES_PER_BYTE * len(raw or b"")
            if len(self.entries) >= self._max_entries or self.nbytes + weight > self.max_bytes:
                self.entries.clear()
                self.nbytes = 0
            old = self.entries.get(token)
            self.nbytes += weight - (old[2] if old is not None else 0)
            self.entries[token] = (config, time.time() + self._ttl_s, weight)
        return config

    def _landed(self, token: str, task: asyncio.Task[ServedEndpoint | None]) -> None:
        if self._inflight.get(token) is task:
            del self._inflight[token]
        if not task.cancelled():
            task.exception()  # marks a failure as seen: every request awaiting it got it already

    def invalidate(self, token: str) -> None:
        """Drops the token's cached config (``*``: every token) and detaches its lookup in flight."""
        self._generation += 1
        if token == "*":
            self.entries.clear()
            self.nbytes = 0
            self._inflight.clear()
        else:
            old = self.entries.pop(token, None)
            if old is not None:
                self.nbytes -= old[2]
            self._inflight.pop(token, None)

    async def listen(self) -> None:
        """Runs for the life of the process; reconnects with backoff when Redis goes away."""
        delay = 0.1
        while True:
            pubsub = self._redis.pubsub()
            try:
                await self._subscribe(pubsub)
                self.invalidate("*")  # anything announced before the subscription took effect was missed
                self.listening.set()
                delay = 0.1
                await self._serve_notices(pubsub)
            except (RedisError, OSError) as exc:
                log.warning("config listener lost Redis (%s); retrying in %.1fs", exc, delay)
                if self._sharded:  # the channel may have moved: the next SSUBSCRIBE goes where the map says
                    await self._reload_slots(exc)
            except Exception:  # a bug here must not end invalidation for the life of the process
                log.exception("config listener failed; retrying in %.1fs", delay)
            finally:
                # Not listening: nothing cached may be served, nothing in flight shared.
                self.listening.clear()
                self.invalidate("*")
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # unannotated in redis-py before 8.2
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _reload_slots(self, exc: Exception) -> None:
        nodes = self._redis.nodes_manager  # type: ignore[attr-defined]  # sharded: a RedisCluster
        try:
            if isinstance(exc, MovedError):
                await nodes.move_slot(exc)
            else:
                await nodes.initialize()
        except (RedisError, OSError) as failed:  # the next round tries again
            log.warning("config listener could not reload the cluster's slot map (%s)", failed)

    async def _subscribe(self, pubsub: aioredis.client.PubSub) -> None:
        """Returns once Redis confirmed the subscription: every PUBLISH from then on reaches this listener."""
        if self._sharded:
            await pubsub.ssubscribe(self._keys.config_channel)
        else:
            await pubsub.subscribe(self._keys.config_channel)
        async with asyncio.timeout(10):
            while True:
                message = await self._next(pubsub, 1.0)
                if message is not None and message["type"] in ("subscribe", "ssubscribe"):
                    return

    async def _next(self, pubsub: aioredis.client.PubSub, wait_s: float) -> dict[str, Any] | None:
        message: dict[str, Any] | None
        if self._sharded:  # a cluster client's pubsub (ClusterPubSub) has the sharded calls
            message = await pubsub.get_sharded_message(timeout=wait_s)  # type: ignore[attr-defined, unused-ignore]  # see above
        else:
            message = await pubsub.get_message(timeout=wait_s)
        return message

    async def _ping(self, pubsub: aioredis.client.PubSub) -> None:
        if self._sharded:  # the connection of the channel's node
            for node_pubsub in list(pubsub.node_pubsub_mapping.values()):  # type: ignore[attr-defined]  # a ClusterPubSub
                await node_pubsub.ping()
        else:
            await pubsub.ping()

    async def _serve_notices(self, pubsub: aioredis.client.PubSub) -> None:
        """Applies notices until the connection fails; a PING after each quiet interval proves it alive."""
        loop = asyncio.get_running_loop()
        heard = loop.time()
        while True:
            message = await self._next(pubsub, self._ping_every_s)
            if message is None:
                if loop.time() - heard > 1.5 * self._ping_every_s:
                    raise ConnectionError(f"no answer to PING within {self._ping_every_s:.0f}s")
                await self._ping(pubsub)
                continue
            heard = loop.time()
            kind = message["type"]
            if kind in ("message", "smessage"):
                await self._apply(message["data"])
            elif kind == "sunsubscribe":  # the channel's slot moved to another node
                raise ConnectionError("the config channel's slot moved; subscribing again")

    async def _apply(self, data: bytes) -> None:
        try:
            notice = decode_config_notice(data)
        except (msgspec.MsgspecError, UnicodeDecodeError):
            log.error("unreadable config notice; dropping every cached config")
            self.invalidate("*")
            return
        for token in notice.tokens:
            self.invalidate(token)
        if notice.ack is not None:
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.rpush(notice.ack, 1)
                    pipe.expire(notice.ack, ACK_TTL_S)
                    await pipe.execute()
            except (RedisError, OSError) as exc:  # control waits out its timeout and says so
                log.warning("could not confirm a config change (%s)", exc)
