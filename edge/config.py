"""The edge's in-process view of endpoint configs: a cache over Redis, invalidated over pub/sub.

Control writes ``EdgeEndpoint`` records under ``Keys.endpoint_config(token)`` and publishes the token on
``Keys.config_channel`` after each change; every edge node's listener drops that token (``*`` drops all),
so a change applies everywhere within a pub/sub round trip. Unknown tokens are cached too (as ``None``),
so a flood of bad tokens costs one Redis GET each per TTL, not one per request. The TTL is only a safety
net for a lost message; after a listener reconnect the whole cache is dropped because messages may have
been missed while it was away. Expiry is wall-clock time (``time.time()``), the clock the hot path reads
anyway for the event's timestamp, so a cache hit costs one dict lookup and no clock call of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from edge.trust import ServedEndpoint
from shared.keys import Keys
from shared.wire import decode_edge_endpoint

__all__ = ("EndpointCache",)

log = logging.getLogger("hookyard.edge")


class EndpointCache:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, ttl_s: float = 30.0, max_entries: int = 100_000) -> None:
        self._redis = redis
        self._keys = keys
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self.entries: dict[str, tuple[ServedEndpoint | None, float]] = {}
        """token → (config or None for an unknown token, expiry as ``time.time()``). The hot path reads it
        directly; it is cleared and updated in place, never replaced."""
        # Bumped on every invalidation: a lookup that started before one must not store what it read.
        self._generation = 0
        self.listening = asyncio.Event()

    async def get(self, token: str) -> ServedEndpoint | None:
        """The config serving ``token``; None for an unknown (or empty) token."""
        if not token:
            return None
        entry = self.entries.get(token)
        now = time.time()
        if entry is not None and entry[1] > now:
            return entry[0]
        generation = self._generation
        raw = await self._redis.get(self._keys.endpoint_config(token))
        config = None
        if raw is not None:
            try:
                config = ServedEndpoint(decode_edge_endpoint(raw), self._keys)
            except (msgspec.MsgspecError, ValueError):
                log.error("edge config of a token is unreadable; serving it as unknown until control rewrites it")
        if generation == self._generation:
            if len(self.entries) >= self._max_entries:
                self.entries.clear()
            self.entries[token] = (config, now + self._ttl_s)
        return config

    def invalidate(self, token: str) -> None:
        self._generation += 1
        if token == "*":
            self.entries.clear()
        else:
            self.entries.pop(token, None)

    async def listen(self) -> None:
        """Runs for the life of the process; reconnects with backoff when Redis goes away."""
        delay = 0.1
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._keys.config_channel)
                self.invalidate("*")
                self.listening.set()
                delay = 0.1
                async for message in pubsub.listen():
                    data = message.get("data")
                    if isinstance(data, bytes):
                        self.invalidate(data.decode())
            except (RedisError, OSError) as exc:
                self.listening.clear()
                log.warning("config listener lost Redis (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()
