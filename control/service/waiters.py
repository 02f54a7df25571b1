"""Wakeups for long-poll waiters: one Redis pub/sub connection per process, fanned out in memory.

The flush worker PUBLISHes the ids of freshly committed events on ``keys.event_channel(endpoint_id)``.
``Wakeups`` SUBSCRIBEs to the channel of every endpoint that has at least one waiter in this process
(reference counted: the first waiter subscribes, the last one leaving unsubscribes) and hands each
message to the ``Waiter`` objects of that channel: an ``asyncio.Event`` plus the announced ids. A
waiter costs a set entry and an Event; nothing polls.

Why per-channel SUBSCRIBE rather than one PSUBSCRIBE on ``ev:*``: a pattern would carry every event
of the deployment into every control process, waiters or not.

Correctness rests on one rule: whenever this process may have missed messages of a channel - its
subscription was just confirmed (first waiter, or again after a reconnect) - every waiter of that
channel is told to *resync* (re-query the database in full) instead of trusting the ids. So a waiter
that looked before its subscription was live, or across a Redis restart, still sees every commit.
A supervisor task owns the connection: on any error, or when its own heartbeat (a PUBLISH to a private
channel every ``heartbeat_s``) stops coming back, it drops the connection, reconnects with backoff and
subscribes again to whatever channels have waiters at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

from shared import redis_client
from shared.keys import Keys

__all__ = ("Waiter", "Wakeups")

log = logging.getLogger("hookyard.control.wakeups")


class Waiter:
    """One long-poll call's inbox: set when its endpoint has news, with the ids announced since ``take``."""

    __slots__ = ("_ids", "_resync", "_signal", "confirmed")

    def __init__(self, *, confirmed: bool) -> None:
        self._signal = asyncio.Event()
        self._ids: list[str] = []
        self._resync = True  # a new waiter has seen nothing yet: its first look is a full query
        self.confirmed = confirmed

    def _announce(self, ids: list[str]) -> None:
        self._ids.extend(ids)
        self._signal.set()

    def _need_resync(self) -> None:
        self._resync = True
        self.confirmed = True
        self._signal.set()

    def take(self) -> tuple[bool, list[str]]:
        """(resync, ids) gathered since the last call, and clears the signal: call it *before* looking."""
        self._signal.clear()
        resync, ids = self._resync, self._ids
        self._resync, self._ids = False, []
        return resync, ids

    async def wait(self, seconds: float) -> bool:
        """True when signalled within ``seconds``."""
        if seconds <= 0:
            return self._signal.is_set()
        try:
            await asyncio.wait_for(self._signal.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def ready(self, seconds: float) -> bool:
        """Waits (bounded) until the channel's subscription is live, so the first look needs no second."""
        return self.confirmed or await self.wait(seconds)


class Wakeups:
    """The process's pub/sub fan-out; owned by the control app's lifespan (``aclose`` at shutdown)."""

    def __init__(self, redis_url: str, keys: Keys, *, heartbeat_s: float = 10.0) -> None:
        self._url = redis_url
        self._heartbeat_s = heartbeat_s
        self._name = f"hookyard-wakeups-{uuid.uuid4().hex[:12]}"
        self._control = keys.event_channel(f"~{self._name}")  # never an endpoint id (those are ep_...)
        self._channels: dict[str, set[Waiter]] = {}
        self._confirmed: set[str] = set()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._was_healthy = False
        self.connected = False
        """True while the connection is subscribed and its heartbeat comes back."""
        self.generation = 0
        """How many connections were made so far (observability, tests)."""

    @property
    def client_name(self) -> str:
        """The pub/sub connection's CLIENT SETNAME, to find it in CLIENT LIST."""
        return self._name

    def is_subscribed(self, channel: str) -> bool:
        """True once Redis confirmed the channel's subscription on the current connection."""
        return channel in self._confirmed

    def waiter_count(self, channel: str | None = None) -> int:
        if channel is not None:
            return len(self._channels.get(channel, ()))
        return sum(len(w) for w in self._channels.values())

    @contextlib.asynccontextmanager
    async def watch(self, channel: str) -> AsyncIterator[Waiter]:
        """Registers a waiter on ``channel`` for the block. Registration and release are synchronous, so
        a cancelled request (client gone) leaves nothing behind."""
        if self._closed:
            raise RuntimeError("wakeups are closed")
        waiters = self._channels.setdefault(channel, set())
        waiter = Waiter(confirmed=channel in self._confirmed)
        waiters.add(waiter)
        if len(waiters) == 1:
            self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._supervise(), name="hookyard-wakeups")
        try:
            yield waiter
        finally:
            waiters.discard(waiter)
            if not waiters and self._channels.get(channel) is waiters:
                del self._channels[channel]
                self._changed.set()

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- the connection ----------------------------------------------------------------------------
    async def _supervise(self) -> None:
        backoff = 0.05
        while not self._closed:
            client = pubsub = None
            try:
                client = redis_client.connect(self._url, blocking_reads=True, client_name=self._name)
                pubsub = client.pubsub()
                await self._session(client, pubsub)
            except Exception as exc:  # noqa: BLE001 - any failure means: reconnect, then resync everyone
                while isinstance(exc, ExceptionGroup):
                    exc = exc.exceptions[0]
                log.warning("wakeups: pub/sub connection lost (%s: %s); reconnecting", type(exc).__name__, exc)
            finally:
                self.connected = False
                self._confirmed.clear()
                for closable in (pubsub, client):
                    if closable is not None:
                        with contextlib.suppress(Exception):
                            await closable.aclose()
            backoff = 0.05 if self._was_healthy else min(backoff * 2, 5.0)
            await asyncio.sleep(backoff)

    async def _session(self, client: aioredis.Redis, pubsub: aioredis.client.PubSub) -> None:
        self._was_healthy = False
        await pubsub.subscribe(self._control)
        self.generation += 1
        self._changed.set()  # subscribe every channel that has waiters now
        async with asyncio.TaskGroup() as group:
            group.create_task(self._reconcile(pubsub))
            group.create_task(self._read(pubsub))
            group.create_task(self._heartbeat(client))

    async def _reconcile(self, pubsub: aioredis.client.PubSub) -> None:
        """Makes the subscriptions follow the channels that have waiters; batches bursts into one command."""
        subscribed: set[str] = set()
        while True:
            await self._changed.wait()
            self._changed.clear()
            wanted = set(self._channels)
            if add := wanted - subscribed:
                await pubsub.subscribe(*add)
                subscribed |= add
            if drop := subscribed - wanted:
                await pubsub.unsubscribe(*drop)
                subscribed -= drop
                self._confirmed -= drop

    async def _heartbeat(self, client: aioredis.Redis) -> None:
        while True:
            await client.publish(self._control, b"")
            await asyncio.sleep(self._heartbeat_s)

    async def _read(self, pubsub: aioredis.client.PubSub) -> None:
        loop = asyncio.get_running_loop()
        last_seen = loop.time()
        while True:
            message = await pubsub.get_message(timeout=self._heartbeat_s)
            now = loop.time()
            if message is None:
                if now - last_seen > 3 * self._heartbeat_s:
                    raise ConnectionError(f"no heartbeat for {now - last_seen:.0f}s")
                continue
            last_seen = now
            kind = message["type"]
            raw = message["channel"]
            channel = raw.decode() if isinstance(raw, bytes) else str(raw)
            if channel == self._control:
                if kind == "message" and not self.connected:
                    self.connected = self._was_healthy = True
                continue
            if kind == "message":
                data = message["data"]
                text = data.decode() if isinstance(data, bytes) else str(data)
                ids = [i for i in text.split(",") if i]
                for waiter in self._channels.get(channel, ()):
                    waiter._announce(ids)
            elif kind == "subscribe":
                self._confirmed.add(channel)
                for waiter in self._channels.get(channel, ()):
                    waiter._need_resync()
            elif kind == "unsubscribe":
                self._confirmed.discard(channel)
