"""Wakeups for long-poll waiters: one Redis pub/sub connection per process, fanned out in memory.

The flush worker PUBLISHes the ids of freshly committed events on ``keys.event_channel(endpoint_id)``.
``Wakeups`` SUBSCRIBEs to the channel of every endpoint that has at least one waiter in this process
(reference counted: the first waiter subscribes, the last one leaving unsubscribes) and hands each
message to the ``Waiter`` objects of that channel: a signal plus the announced ids. A waiter costs a set
entry and, while it sleeps, a future and a timer; nothing polls.

Why per-channel SUBSCRIBE rather than one PSUBSCRIBE on ``ev:*``: a pattern would carry every event
of the deployment into every control process, waiters or not.

Correctness rests on one rule: whenever this process may have missed messages of a channel - its
subscription was just confirmed (first waiter, or again after a reconnect) - every waiter of that
channel is told to *resync* (re-query the database in full) instead of trusting the ids. So a waiter
that looked before its subscription was live, or across a Redis restart, still sees every commit.
A supervisor task owns the connection: on any error, or when its own heartbeat (a PUBLISH to a private
channel every ``heartbeat_s``) stops coming back, it drops the connection, reconnects with backoff and
subscribes again to whatever channels have waiters at that moment.

When the server is asked to stop (``stop``, on the process's stop signal, ``shared.stopping``) every waiter
ends as if its time were up, and a waiter made after that ends at once: granian waits for the requests in
flight before it stops, so a parked long poll would otherwise hold the shutdown for its whole timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from shared import redis_client
from shared.keys import Keys

__all__ = ("ENDPOINT_GONE", "Look", "Waiter", "Wakeups")

T = TypeVar("T")

log = logging.getLogger("hookyard.control.wakeups")

_NO_RETRY = Retry(NoBackoff(), 0, supported_errors=())
"""The pub/sub client's connection never reconnects by itself: redis-py's ``PubSub`` would reconnect inside a
``subscribe`` while ``get_message`` reads the same connection (``RuntimeError: read() called while another
coroutine is already waiting``), and could leave the new socket unclosed. A lost connection fails the
session instead, and ``_supervise`` closes everything and connects anew."""


ENDPOINT_GONE = "~gone"
"""Published on an endpoint's channel by its delete (never an event id: those are ``ev_`` and a ULID): its waiters
look at once whether the endpoint is still there, instead of answering 204 at their deadline."""

Look = Callable[[bool, list[str]], asyncio.Future[T | None]]
"""``look(resync, ids)``: starts a look at the database, returning a future of its answer (None: no match)."""


class Waiter(Generic[T]):
    """One long-poll call's inbox: what its endpoint announced since the last look, and whether it must resync.

    ``first`` runs the looks from the fan-out itself: the PUBLISH callback starts (or joins) the database
    look of every waiter of the channel at once, and a waiter's task is resumed only when a look found its
    answer. Waking each task first to let it start its own look cost a task step per waiter and put the
    shared query behind a thousand of them; a waiter whose look finds nothing is never woken at all.

    Timers are bare futures plus ``call_later``, not ``asyncio.wait_for``: on Python 3.11 that wraps every
    wait in a Task of its own."""

    __slots__ = (
        "_answer",
        "_expired",
        "_ids",
        "_look",
        "_looking",
        "_resync",
        "_signalled",
        "_wakeup",
        "confirmed",
        "stopped",
    )

    def __init__(self, *, confirmed: bool, stopped: bool = False) -> None:
        self._signalled = False
        self._wakeup: asyncio.Future[None] | None = None
        self._ids: list[str] = []
        self._resync = True  # a new waiter has seen nothing yet: its first look is a full query
        self._look: Look[T] | None = None
        self._looking = False
        self._expired = False
        self._answer: asyncio.Future[T | None] | None = None
        self.confirmed = confirmed
        self.stopped = stopped
        """The server is stopping: waits end now, and whoever loops on them should answer and leave."""

    def _signal(self) -> None:
        self._signalled = True
        if self._look is not None:
            if not self._looking:
                self._start_look()
            return
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    def _announce(self, ids: list[str]) -> None:
        self._ids.extend(ids)
        self._signal()

    def _need_resync(self) -> None:
        self._resync = True
        self.confirmed = True
        self._signal()

    def _stop(self) -> None:
        """Ends the wait in progress as if its time were up (a look already running still answers)."""
        self.stopped = True
        if self._answer is not None:
            self._expire()
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    @property
    def parked(self) -> bool:
        """Subscribed and waiting with nothing left to look at: an announcement made now reaches it, and only
        the look that announcement starts stands between the PUBLISH and its answer. A waiter registered but
        still before its first look (or in one, or with news not yet looked at) is not parked: a sender that
        took registration for parking measured the waiters' own first looks, queued on the pool ahead of the
        look its event starts (``bench wait``: 1,000 distinct first looks)."""
        if not self.confirmed or self.stopped or self._signalled or self._resync or self._ids:
            return False
        if self._answer is not None:  # in ``first``: no look running, and the time not up
            return not self._looking and not self._expired and not self._answer.done()
        return self._wakeup is not None and not self._wakeup.done()  # asleep in ``wait``

    def take(self) -> tuple[bool, list[str]]:
        """(resync, ids) gathered since the last call, and clears the signal: call it *before* looking."""
        self._signalled = False
        resync, ids = self._resync, self._ids
        self._resync, self._ids = False, []
        return resync, ids

    async def wait(self, seconds: float) -> bool:
        """True when signalled within ``seconds``; at once once stopped."""
        if self._signalled or seconds <= 0 or self.stopped:
            return self._signalled
        loop = asyncio.get_running_loop()
        wakeup = self._wakeup = loop.create_future()
        timer = loop.call_later(seconds, _expire, wakeup)
        try:
            await wakeup
        finally:
            timer.cancel()
            self._wakeup = None
        return self._signalled

    async def ready(self, seconds: float) -> bool:
        """Waits (bounded) until the channel's subscription is live, so the first look needs no second."""
        return self.confirmed or await self.wait(seconds)

    async def first(self, look: Look[T], seconds: float) -> T | None:
        """The first answer of ``look`` that is not None, or None once ``seconds`` pass without one.

        ``look(resync, ids)`` is called with what was taken, at once when there is news already (a new
        waiter must resync) and then on every announcement; one look at a time, in order, so news that
        arrives during a look is taken by the next one. A look still running when time is up is
        awaited (a match it finds is returned); no look starts after that. A look that fails fails the call.
        Once stopped, time is up at once: only the first look (a new waiter's) still answers."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T | None] = loop.create_future()
        self._answer, self._look, self._expired = answer, look, False
        timer = loop.call_later(0 if self.stopped else max(seconds, 0), self._expire)
        try:
            if self._signalled or self._resync or self._ids:
                self._start_look()
            return await answer
        finally:
            timer.cancel()
            self._look = self._answer = None

    def _expire(self) -> None:
        self._expired = True
        if not self._looking and self._answer is not None and not self._answer.done():
            self._answer.set_result(None)

    def _start_look(self) -> None:
        look, answer = self._look, self._answer
        if look is None or answer is None or answer.done() or self._expired:
            return
        resync, ids = self.take()
        if not (resync or ids):
            return
        try:
            pending = look(resync, ids)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting call, never lost in the fan-out
            answer.set_exception(exc)
            return
        self._looking = True
        pending.add_done_callback(self._looked)

    def _looked(self, pending: asyncio.Future[T | None]) -> None:
        self._looking = False
        answer = self._answer
        if answer is None or answer.done():  # the caller left meanwhile
            return
        if pending.cancelled():
            answer.cancel()
        elif (error := pending.exception()) is not None:
            answer.set_exception(error)
        elif (found := pending.result()) is not None or self._expired:
            answer.set_result(found)
        elif self._signalled:  # news arrived during the look
            self._start_look()


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)


class Wakeups:
    """The process's pub/sub fan-out; owned by the control app's lifespan (``aclose`` at shutdown)."""

    def __init__(self, redis_url: str, keys: Keys, *, heartbeat_s: float = 10.0) -> None:
        self._url = redis_url
        self._heartbeat_s = heartbeat_s
        self._name = f"hookyard-wakeups-{uuid.uuid4().hex[:12]}"
        self._control = keys.event_channel(f"~{self._name}")  # never an endpoint id (those are ep_...)
        self._channels: dict[str, set[Waiter[Any]]] = {}
        self._confirmed: set[str] = set()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._was_healthy = False
        self.stopping = False
        """Set by ``stop``: the server is stopping, waits end at once."""
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

    def parked_count(self) -> int:
        """Waiters that are ``parked``: what a sender waits for before it times a wake-up (the
        ``hookyard_wait_parked`` gauge; ``waiter_count`` counts registrations, parked or not)."""
        return sum(waiter.parked for waiters in self._channels.values() for waiter in waiters)

    @contextlib.contextmanager
    def watch(self, channel: str) -> Iterator[Waiter[Any]]:
        """Registers a waiter on ``channel`` for the block. Registration and release are synchronous, so
        a cancelled request (client gone) leaves nothing behind."""
        if self._closed:
            raise RuntimeError("wakeups are closed")
        waiters = self._channels.setdefault(channel, set())
        waiter: Waiter[Any] = Waiter(confirmed=channel in self._confirmed, stopped=self.stopping)
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

    def stop(self) -> None:
        """The server is stopping: every wait ends now (long polls answer 204, streams close) and new ones at
        once, so the requests in flight finish and the server can stop without cutting any connection."""
        self.stopping = True
        for waiters in list(self._channels.values()):
            for waiter in list(waiters):
                waiter._stop()

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
                client = redis_client.connect(self._url, blocking_reads=True, client_name=self._name, retry=_NO_RETRY)
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
