"""What a deliver worker does with a claimed batch before sending it, for destinations that shape their
deliveries (issue 27; docs/adr/0036-delivery-shaping-state.md): deduplication, then the rate limit. A batch
without such a destination passes through untouched, after one look at each task's columns.

- **Deduplication** (``control.db.dedup``): one statement for the batch's tasks of deduplicating
  destinations; duplicates are finished and recorded there, copies whose original may still succeed wait.
- **Rate limit** (``control.delivery.throttle``): one Redis call per limited destination in the batch
  reserves start times; a send waits for its own. Tasks the horizon has no room for go back unsent, and the
  destination is left out of this worker's claims until its next free start is near.
- **Pauses** (a 429 or 503 with ``Retry-After``): the worker that got it leaves the destination out of its
  claims and stops its own waiting sends until the pause ends; a limited destination's Redis key is moved
  past it for the other workers (their claims also read it from Postgres, where the recorder writes it).

Tasks handed back go in one statement (``control.db.tasks.hand_back``), their claim uncounted.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence

import asyncpg
from redis.exceptions import RedisError

from control.db import dedup as db_dedup
from control.db import tasks as db_tasks
from control.db.context import Context
from control.db.leased import LeasedTask
from control.delivery import throttle
from shared import ids

__all__ = ("CLOCKS", "LATE_S", "Shaper")

log = logging.getLogger("hookyard.worker.deliver")

_REDIS_AWAY_S = 1.0
"""How long tasks of a limited destination wait when Redis cannot be asked for their start times."""
LATE_S = 0.02
"""A send that wakes later than this after its reserved start takes a new start instead of going at once.
Tuning note: a stalled event loop (CPU contention, a long GC) once woke nine sends 180 ms late in one
burst, and with the on-time sends of the next reservation a second held 59 at a limit of 50. A start is
used only within this much of its time, so any second holds at most ``1.02 * spaced + 1`` starts (``spaced``:
the rate times ``throttle.HEADROOM``); at 50 ms a loaded machine (load average 10 on 2 cores) measured 53 and
54 at the receiver, whose own stalls bunch arrivals further."""
CLOCKS = 4096
"""Limited destinations whose ``throttle.Clock`` a worker keeps (about 200 bytes each with its key)."""


class Shaper:
    """One per deliver worker."""

    def __init__(self, ctx: Context, *, horizon_s: float) -> None:
        self.ctx = ctx
        self.horizon_s = horizon_s
        """How far ahead start times are reserved (a fraction of the lease)."""
        self._until: dict[str, float] = {}
        """Destinations this worker leaves out of its claims until a monotonic time (paused, or no start
        free within the horizon)."""
        self._paused: dict[str, float] = {}
        """Of those, the paused ones (their waiting sends go back)."""
        self._caps: dict[str, int] = {}
        """Limited destinations: the most tasks worth claiming at once (the starts one horizon holds)."""
        self._clocks: dict[str, throttle.Clock] = {}
        """Limited destinations: Redis's clock as their key's node has it (``throttle.Clock``), at most
        ``CLOCKS`` of them (a tenant can make destinations without end; a clock dropped is learnt again)."""

    def blocked(self, now: float) -> list[str]:
        """Destinations to leave out of the next claim."""
        if not self._until:
            return []
        for destination_id in [d for d, until in self._until.items() if until <= now]:
            del self._until[destination_id]
            self._paused.pop(destination_id, None)
        return list(self._until)

    def unblocked_at(self, now: float) -> float | None:
        """The monotonic time the first of the destinations left out of claims comes back, later than ``now``
        (None: none is): the deliver loop looks again then, not at its next poll."""
        self.blocked(now)  # those back already are forgotten: a time in the past would end every wait at once
        return min(self._until.values(), default=None)

    @property
    def caps(self) -> dict[str, int]:
        return self._caps

    def paused_for(self, destination_id: str) -> float:
        """Seconds this worker knows the destination to be paused for (0: not paused)."""
        until = self._paused.get(destination_id)
        return 0.0 if until is None else max(0.0, until - time.monotonic())

    def pause(self, destination_id: str, seconds: float) -> None:
        """The destination asked for ``seconds`` without deliveries (``Retry-After``): this worker's claims
        leave it out and its waiting sends go back, at once."""
        until = time.monotonic() + seconds
        self._paused[destination_id] = max(until, self._paused.get(destination_id, 0.0))
        self._until[destination_id] = max(until, self._until.get(destination_id, 0.0))

    async def share_pause(self, destination_id: str, seconds: float) -> None:
        """A limited destination's pause for the other workers' next reservations (their claims read it from
        Postgres once the recorder wrote it)."""
        try:
            await throttle.pause(self.ctx.redis, self.ctx.keys.delivery_rate(destination_id), seconds)
        except (RedisError, OSError) as exc:
            log.warning("deliver: could not share the pause of %s (%s)", destination_id, exc)

    async def shape(self, claimed: Sequence[LeasedTask]) -> list[tuple[LeasedTask, throttle.Slot | None]]:
        """The claimed tasks to send, each with when to send it (None: at once); the others are finished
        (duplicates) or handed back here."""
        if not any(t.rate_limit_per_s is not None or t.dedup_key is not None for t in claimed):
            if self._caps:  # a destination whose limit was lifted is claimed for in full again
                for task in claimed:
                    self._caps.pop(task.destination_id, None)
            return [(task, None) for task in claimed]
        back: list[tuple[str, int, float]] = []
        try:
            sending = await self._deduplicate(claimed, back)
            out = await self._throttle(sending, back)
        except Exception:
            back = [(t.id, t.attempts, 0.0) for t in claimed]  # nothing was sent: all of it goes back
            await self.hand_back(back)
            raise
        await self.hand_back(back)
        return out

    async def start_again(self, task: LeasedTask) -> throttle.Slot | None:
        """A new start for a send that woke too late for its own (``LATE_S``), or None when the horizon has
        none (the task is then handed back here)."""
        destination_id, rate = task.destination_id, task.rate_limit_per_s
        if rate is None:  # not rate-limited (only limited sends wait for a start): no start to wait for
            return throttle.Slot(time.monotonic(), math.inf)
        grant = await self._reserve(destination_id, rate, 1)
        if grant is not None and grant.count:
            return grant.slot(0, LATE_S)
        now = time.monotonic()
        next_at = now + _REDIS_AWAY_S if grant is None else grant.start_at(0) - self.horizon_s / 2
        self._until[destination_id] = max(self._until.get(destination_id, 0.0), next_at)
        await self.hand_back([(task.id, task.attempts, max(0.0, next_at - now))])
        return None

    async def hand_back(self, tasks: list[tuple[str, int, float]]) -> None:
        """Claimed tasks ``(id, attempts, delay_s)`` back to pending, unsent; on failure their lease does it."""
        if not tasks:
            return
        try:
            async with self.ctx.pool.acquire() as conn:
                await db_tasks.hand_back(conn, tasks)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("deliver: could not hand back %d unsent tasks (%s); their lease will", len(tasks), exc)

    async def _deduplicate(self, claimed: Sequence[LeasedTask], back: list[tuple[str, int, float]]) -> list[LeasedTask]:
        asks = [
            db_dedup.Ask(
                task_id=t.id,
                attempts=t.attempts,
                destination_id=t.destination_id,
                idempotency_key=t.dedup_key,
                event_id=t.event_id,
                endpoint_id=t.endpoint_id,
                rule_id=t.rule_id,
                destination_name=t.destination_name,
                destination_url=t.destination_url,
                delivery_id=ids.new_id("dlv"),
            )
            for t in claimed
            if t.dedup_key is not None and t.deduplicate_window_s is not None and t.event_found
        ]
        if not asks:
            return list(claimed)
        try:
            async with self.ctx.pool.acquire() as conn:
                decisions = await db_dedup.decide(conn, asks)
        except asyncpg.ForeignKeyViolationError:  # a destination deleted meanwhile: its tasks are gone too
            decisions = {}
        asked = {a.task_id for a in asks}
        sending = []
        for task in claimed:
            if task.id not in asked:
                sending.append(task)
                continue
            decision, owner = decisions.get(task.id, ("gone", None))
            if decision == "send":
                sending.append(task)
            elif decision == "skip":
                log.info("deliver: %s not sent to %s: duplicate of %s", task.event_id, task.destination_id, owner)
            elif decision == "gone":  # not decided (the statement failed on a deleted destination): later
                back.append((task.id, task.attempts, db_dedup.WAIT_S))
        return sending

    async def _throttle(
        self, tasks: list[LeasedTask], back: list[tuple[str, int, float]]
    ) -> list[tuple[LeasedTask, throttle.Slot | None]]:
        out: list[tuple[LeasedTask, throttle.Slot | None]] = []
        limited: dict[str, list[LeasedTask]] = {}
        rates: dict[str, float] = {}
        for task in tasks:
            if task.rate_limit_per_s is None:
                out.append((task, None))
                if self._caps:
                    self._caps.pop(task.destination_id, None)
            else:
                limited.setdefault(task.destination_id, []).append(task)
                rates[task.destination_id] = task.rate_limit_per_s
        if not limited:
            return out
        grants = await asyncio.gather(*(self._reserve(d, rates[d], len(group)) for d, group in limited.items()))
        now = time.monotonic()
        for (destination_id, group), grant in zip(limited.items(), grants, strict=True):
            rate = rates[destination_id]
            self._caps[destination_id] = max(1, math.ceil(rate * self.horizon_s))
            granted = 0 if grant is None else grant.count
            out.extend((task, grant.slot(i, LATE_S)) for i, task in enumerate(group[:granted]))  # type: ignore[union-attr]  # granted is 0 when grant is None
            if granted < len(group):
                # No start free within the horizon for the rest: back until one is near, and no claim till then.
                next_at = now + _REDIS_AWAY_S if grant is None else grant.start_at(granted) - self.horizon_s / 2
                delay = max(0.0, next_at - now)
                back.extend((t.id, t.attempts, delay) for t in group[granted:])
                self._until[destination_id] = max(self._until.get(destination_id, 0.0), now + delay)
        return out

    def _clock(self, destination_id: str) -> throttle.Clock:
        clock = self._clocks.get(destination_id)
        if clock is None:
            if len(self._clocks) >= CLOCKS:  # the oldest made goes: it is learnt again on its next call
                del self._clocks[next(iter(self._clocks))]
            clock = self._clocks[destination_id] = throttle.Clock()
        return clock

    async def _reserve(self, destination_id: str, rate: float, wanted: int) -> throttle.Grant | None:
        try:
            return await throttle.reserve(
                self.ctx.redis,
                self.ctx.keys.delivery_rate(destination_id),
                self._clock(destination_id),
                rate_per_s=rate,
                wanted=wanted,
                horizon_s=self.horizon_s,
            )
        except (RedisError, OSError) as exc:
            log.warning("deliver: no start times for %s from Redis (%s); its tasks wait", destination_id, exc)
            return None
