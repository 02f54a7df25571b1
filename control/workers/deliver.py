"""Deliver: due delivery tasks → HTTP requests to their destinations, each attempt recorded.

One step: return tasks with expired leases (every ``deliver_sweep_s``), claim as many due tasks as there are
free slots (``deliver_concurrency``, at most ``deliver_per_destination`` per destination, circuit permitting,
an account at most its share: ``control.delivery.shares``), start a send for each, and otherwise wait for a
wakeup: the flush's NOTIFY (LISTEN on a dedicated connection), a destination or the worker having room again,
the next retry falling due, or ``deliver_poll_s`` at the latest. Claims are batched so that Postgres round
trips do not grow with the delivery rate: a destination at its cap is claimed for again once half of its
requests finished, a full worker once an eighth of its slots is free.

Sends share one pooled transport (``control.delivery.transport``: HTTP/1.1 keep-alive per destination, the
egress policy checked on every connection). What one send puts on the wire and how its outcome is judged
(signature, transform, retry schedule, ``Retry-After``) is ``control.delivery.attempt``; results are written
in batches by the ``Recorder``. The loop is a worker; everything one task goes through after its claim lives in
``control.delivery`` (docs/adr/0067-delivery-in-one-package.md).

Destinations that shape their deliveries (issue 27, docs/reference/delivery.md): the claim takes FIFO
tasks only at the heads of their lines, released by the ingest stream's watermark; a claimed batch with
tasks of deduplicating or rate-limited destinations goes through :class:`~control.delivery.shaping.Shaper`
(duplicates finished, limited sends given their start times, the rest handed back unsent); a 429 or 503
with ``Retry-After`` pauses the destination for every worker. A batch without such tasks is not touched.

Stopping (SIGTERM): the wait for a wakeup ends at once (``stopping``), nothing more is claimed or started; then
``close``: in-flight sends get ``deliver_drain_s`` to finish and be recorded, the rest are cancelled and handed
back (due at once; else the lease expiry), uncounted when nothing went out yet (a transform call queued, a
rate's start not reached); ``drained`` counts them for the worker's stop line.

A Postgres outage, however long, is waited out: a failing claim or sweep fails the step (the loop backs
off and tries again), finished attempts wait in the Recorder, and nothing is dropped. An outage longer
than the lease is where at-least-once could turn into extra sends: tasks whose results are held in a
Recorder have expired leases, and a sweep would hand them back to be sent again. So:

- a worker never sweeps the tasks it holds itself (a send in flight, a result not yet written);
- while its Recorder cannot write, a worker neither sweeps nor claims (it would only add results that
  cannot be written either), and it resumes once the Recorder has written what it held;
- after any failure to reach Postgres (its own step's or its Recorder's), a worker waits ``SWEEP_GRACE_S``
  before its next sweep, so that the other workers' Recorders, which retry at least every
  ``RETRY_CAP_S``, have written their results before anyone takes their tasks for dead.

What remains: a worker killed during the outage (its tasks sent again after the lease, as after any crash), a
Recorder still unable to write after the grace, and a worker started at an outage's end (no failure to wait after).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Sequence

from redis.exceptions import RedisError

from control.db import tasks as db_tasks
from control.db.context import Context
from control.db.leased import LeasedTask
from control.delivery import egress, ordering
from control.delivery.attempt import Attempts
from control.delivery.claim import claim
from control.delivery.ready import Ready
from control.delivery.recorder import RETRY_CAP_S, Recorder
from control.delivery.returns import Returns, drain_sends
from control.delivery.shaping import Shaper
from control.delivery.shares import Accounts, Shares
from control.delivery.throttle import Slot
from control.delivery.transforms import Transforms, runs_ahead
from control.delivery.wakeup import TaskNotifications

__all__ = ("SWEEP_GRACE_S", "Deliver")

log = logging.getLogger("hookyard.worker.deliver")

SWEEP_GRACE_S = 3 * RETRY_CAP_S
"""Seconds after a failure to reach Postgres before a worker sweeps expired leases: by then every live
worker's Recorder has tried again (every ``RETRY_CAP_S`` at most) and written the results it held."""


class Deliver:
    name = "deliver"
    idle_s = 0.0  # an idle step already waited for a wakeup

    def __init__(self, ctx: Context) -> None:
        s = ctx.settings
        self.ctx = ctx
        self.concurrency = s.deliver_concurrency
        self.transport = egress.client(
            s.egress,
            timeout_s=s.deliver_timeout_s,
            connect_timeout_s=s.deliver_connect_timeout_s,
            max_connections=s.deliver_concurrency,
        )
        # Tuning note: a destination is claimable again whenever its in-flight count is at or below half its
        # cap, not only when the count passes exactly half: a claim that overlapped the last sends used to
        # leave the worker waiting for the 1 s poll, which showed as gaps in the throughput bench.
        self._half = s.deliver_per_destination // 2
        self._batch = max(1, s.deliver_concurrency // 8)
        self._look = True  # something may be claimable (a notification, a timer, the last claim filled up)
        self._room: set[str] = set()
        """Destinations with room again since the last claim (a send of theirs finished): a claim is worth
        it for them only while they are not blocked (``_step``)."""
        self._quiet_until = 0.0
        self._due_at: float | None = None  # monotonic time the next pending task falls due, when known
        self._wake = asyncio.Event()
        self.recorder = Recorder(ctx, on_written=self._written)
        self.transforms = Transforms(ctx, on_park=self._parked, per_account=max(2, s.deliver_concurrency // 4))
        # Rate-limited sends wait for their start, then send: both within the lease.
        self.shaper = Shaper(ctx, horizon_s=min(1.0, (s.deliver_lease_s - s.deliver_timeout_s) / 2))
        self._notifications = TaskNotifications(s.database_url or "", self._notified, on_state=self._state_changed)
        self._sends: dict[asyncio.Task[None], tuple[str, int]] = {}  # send → (task id, attempts)
        self.ready = Ready(
            per_destination=s.deliver_per_destination, lease_s=s.deliver_lease_s, send_s=s.deliver_timeout_s
        )
        """Tasks claimed ahead of their destination's free slots (``control.delivery.ready``)."""
        self.returns = Returns(ctx, self.ready, self.transforms, on_done=self._returned)
        """Those not started in time, handed back or leased again (``control.delivery.returns``)."""
        self._per_destination: Counter[str] = Counter()
        self.shares = Shares(concurrency=s.deliver_concurrency, share=s.deliver_account_share)
        self._transforming: dict[asyncio.Task[None], tuple[list[LeasedTask], float]] = {}
        """Claims' transformed tasks whose transforms run ahead (``_transform_ahead``) → them and their claim's
        time: leased, holding no send slot, bounded per account by ``crowded``, not by the destination's cap."""
        self._ahead: Counter[str] = Counter()
        self._ahead_n = 0
        self._closing = False
        self._stopping = False  # SIGTERM: no claim nor start from here on (``stopping``)
        self._next_sweep = 0.0
        self._trouble_at = float("-inf")  # monotonic time this worker's step last failed
        self._waiting_for_recorder = False
        self.attempts = Attempts(
            ctx, transport=self.transport, recorder=self.recorder, shaper=self.shaper, transforms=self.transforms
        )

    @property
    def in_flight(self) -> int:
        return len(self._sends)

    def _active(self) -> int:
        """Sends holding a slot: those whose transform waits or runs in the sandbox pool do not
        (``Transforms.parked``), nor tasks transformed ahead of their send, up to four concurrencies of them
        together: what the worker holds stays bounded."""
        ahead = self._ahead_n
        return len(self._sends) + ahead - min(self.transforms.parked + ahead, 4 * self.concurrency)

    def _parked(self) -> None:
        """A send's transform went to the sandbox pool: its slot is free for another send, claimed for if
        something may be claimable. A free slot alone is no reason to look, as for a finished send: with
        every destination that has tasks blocked, that claim scanned their backlog and found nothing."""
        if (self._look or self._room) and not self._wake.is_set() and self._free() >= self._batch:
            self._wake.set()

    def _free(self) -> int:
        # Busy: held tasks less the pace's allowance, results waiting beyond a concurrency; at 3x, no claim (ADR 0034).
        now, behind = time.monotonic(), max(0, self.recorder.queued - self.concurrency)
        free = self.concurrency - self._active() - behind - self.ready.count + self.ready.allowance(now)
        return free if behind < 2 * self.concurrency else 0

    def _held(self, now: float) -> dict[str, int]:
        """Per destination (``Ready.tracked``): its sends in flight and tasks held ahead, less what its pace allows
        ahead (the count the caps compare, so a destination without pace is capped exactly as before). Not its
        tasks whose transforms run ahead: they hold no send slot and ``crowded`` bounds them (ADR 0060, amended
        2026-12-03 afternoon); counted, a busy transformed destination's claims took 126 tasks, against 172."""
        per = self._per_destination
        return {
            d: per.get(d, 0) + self.ready.held(d) - self.ready.ahead(d, now)
            for d in self.ready.tracked([*per, *self._ahead])
        }

    def _notified(self) -> None:
        self._look = True
        self._wake.set()

    def _state_changed(self, state: str, destination_id: str) -> None:
        """A destination was disabled (nothing more goes to it: what was claimed ahead goes back, and a send
        about to start is handed back by its attempt) or enabled again."""
        if state == "enabled":
            self.attempts.disabled.pop(destination_id, None)
            return
        self.attempts.disabled[destination_id] = time.monotonic()
        unsent = self.ready.take_all(destination_id)
        if unsent:
            self.returns.hand_back(unsent)

    def _written(self, had_failures: bool, released: bool) -> None:
        """A batch of results is committed. ``released``: a FIFO task in it finished, so the next of its line is
        a head now; nothing else wakes the loop for it (the send's end came before the commit), and it waited
        for the poll (about a second between two deliveries of a line)."""
        if had_failures or released:  # claimable again: failures counted, or lines moved on
            self._look = True
        if self._waiting_for_recorder and not self.recorder.stalled:
            self._look = True
            self._wake.set()
        # Not only when looking: a send that finished while results waited here gave its destination room
        # but no wakeup (``_free`` counted those results), and this write is what frees the slots. Waking for
        # ``_look`` alone left the loop asleep until its poll with a destination claimable and every slot
        # free: 43 one-second stalls in one ``bench delivery`` run (0.33 transformed ratio; 2, both idle, and
        # 0.81 with this).
        if (self._look or self._room) and self._free() >= self._batch:
            self._wake.set()

    async def step(self) -> int:
        try:
            return await self._step()
        except Exception:
            self._trouble_at = time.monotonic()
            self._look = True  # the claim may not have happened: look again after the loop's backoff
            raise

    async def _step(self) -> int:
        s = self.ctx.settings
        self._wake.clear()  # before looking: a wakeup from here on ends the wait below
        await self._notifications.ensure()
        if self._stopping:
            return 0
        self._waiting_for_recorder = self.recorder.stalled
        if self._waiting_for_recorder:
            # Its results cannot be written (Postgres away): sweeping could hand back tasks whose results
            # wait there, and claiming would only add more. Wait for it to write (it wakes us).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), s.deliver_poll_s)
            return 0
        now = time.monotonic()
        if now >= self._next_sweep and now >= max(self._trouble_at, self.recorder.failed_at) + SWEEP_GRACE_S:
            self._next_sweep = now + s.deliver_sweep_s
            self.ready.forget_idle(now)
            self.shares.forget(self.ready.tracked([*self._per_destination, *self._ahead]))
            held = [task_id for task_id, _ in self._sends.values()]
            held.extend(self.recorder.task_ids())
            held.extend(self.ready.task_ids())
            held.extend(self.returns.task_ids())
            held.extend(t.id for tasks, _ in self._transforming.values() for t in tasks)
            async with self.ctx.pool.acquire() as conn:
                swept = await db_tasks.sweep_expired(conn, max_attempts=self.attempts.max_attempts, exclude=held)
            if swept:
                log.warning("deliver: %d tasks had an expired lease (a worker stopped mid-attempt); due again", swept)
                self._look = True
        now = time.monotonic()
        wait_s = s.deliver_poll_s
        free = self._free()
        if (self._look or self._room) and free >= self._batch:
            holding = self._held(now)
            accounts, full = self.shares.accounts(holding)  # accounts at their share: their destinations too
            blocked = [d for d, n in holding.items() if n > self._half] + full
            blocked += [*self.recorder.failing, *self.shaper.blocked(now), *self.transforms.crowded()]
            blocked += self.returns.destinations()
            if not self._look and self._room.issubset(blocked):
                # Only destinations that had room looked, and they are blocked again (more of their sends
                # started, or their account's transforms crowd the sandbox): the claim would only scan
                # their backlog to leave it (ADR 0060: a third of a transformed bench round's claims, 8 ms
                # of Postgres each). Their next finished send looks again.
                self._room.clear()
            elif blocked and now < self._quiet_until:
                # Skipping a busy destination's backlog costs a scan of it: at most every 50 ms.
                wait_s = self._quiet_until - now
            else:
                self._quiet_until = now + 0.05 if blocked else 0.0
                self._look = False
                self._room.clear()
                claimed, due_in_s = await self._claim(free, blocked, accounts)
                self._due_at = None if due_in_s is None else time.monotonic() + due_in_s
                if len(claimed) == free:
                    self._look = True  # there may be more
                if claimed:
                    return len(claimed)
        if self._due_at is not None:
            wait_s = min(wait_s, max(0.0, self._due_at - now) + 0.001)
        if (unblocked_at := self.shaper.unblocked_at(now)) is not None:  # a pause or a rate's wait ends
            wait_s = min(wait_s, max(0.0, unblocked_at - now) + 0.001)
        try:
            await asyncio.wait_for(self._wake.wait(), wait_s)
        except TimeoutError:
            self._look = True  # the poll: a lost notification, a retry or push-back falling due
            self._due_at = None
        return 0

    async def _claim(self, free: int, blocked: list[str], accounts: Accounts) -> tuple[list[LeasedTask], float | None]:
        s = self.ctx.settings
        claimed_at = time.monotonic()
        async with self.ctx.pool.acquire() as conn:
            claimed, due_in_s = await claim(
                conn,
                free=free,
                in_flight=self._held(claimed_at),
                per_destination=s.deliver_per_destination,
                blocked=blocked,
                lease_s=s.deliver_lease_s,
                cooldown_s=s.circuit_cooldown_s,
                caps=self.shaper.caps,
                watermarks=self._watermarks,
                accounts=accounts,
            )
        self.shares.learn(claimed)
        now_held: list[LeasedTask] = []
        ahead: list[LeasedTask] = []
        shaped = await self.shaper.shape(claimed)
        if len(shaped) < len(claimed) and any(t.ordered for t in claimed):
            self._look = True  # a FIFO head skipped as a duplicate is finished: the next of its line may go
        for task, slot in shaped:
            if slot is not None:  # a rate-limited send: its start is reserved, it waits for it in its own task
                self._start(task, slot)
            elif runs_ahead(task):
                ahead.append(task)
            else:
                now_held.append(task)
        self.ready.add(now_held, claimed_at)
        groups: dict[tuple[str, str | None], list[LeasedTask]] = {}
        for task in ahead:
            groups.setdefault((task.destination_id, task.transform_digest), []).append(task)
        for group in groups.values():  # each its own: one destination's runaway never holds up another's
            self._transform_ahead(group, claimed_at)
        self._start_ready()
        return claimed, due_in_s

    def _transform_ahead(self, tasks: list[LeasedTask], claimed_at: float) -> None:
        """A claim's transformed tasks of one destination run their transform before they take a send slot:
        together, one job of the sandbox pool (``Transforms.ahead``), and then they wait for their destination's slots
        like any task claimed ahead, their results waiting for their attempts. Per transformed delivery that is
        a share of one future, one pipe write and one answer instead of one each, and no send slot held while
        the transform runs (ADR 0060, amendment of 2026-12-03 morning). FIFO and rate-limited tasks, and
        those of a transform marked crashed, run theirs in their attempt as before."""
        work = asyncio.create_task(self.transforms.ahead(tasks), name="deliver:transform")
        self._transforming[work] = (tasks, claimed_at)
        for task in tasks:
            self._ahead[task.destination_id] += 1
        self._ahead_n += len(tasks)
        work.add_done_callback(self._transformed)

    def _transformed(self, work: asyncio.Task[None]) -> None:
        """Transforms run ahead are done: their tasks wait for slots (``Ready``). Had it failed (a store away
        while loading the source), their attempts run the transforms themselves."""
        tasks, claimed_at = self._transforming.pop(work)
        self._ahead_n -= len(tasks)
        for task in tasks:
            left = self._ahead[task.destination_id] - 1
            if left > 0:
                self._ahead[task.destination_id] = left
            else:
                del self._ahead[task.destination_id]
        if work.cancelled() or self._closing:  # ``close`` hands them back
            return
        if (failed := work.exception()) is not None:
            log.warning("deliver: transforms ahead of %d tasks failed (%s); each runs its own", len(tasks), failed)
        self.ready.add(tasks, claimed_at, unsent=self.transforms.unsent_ahead)  # those sending nothing: from now
        self._start_ready()
        now = time.monotonic()
        held = self._held(now)
        self._room.update(d for d in {t.destination_id for t in tasks} if held.get(d, 0) <= self._half)
        if (self._look or self._room) and self._free() >= self._batch:
            self._wake.set()

    async def _watermarks(self) -> Sequence[str | None] | None:
        try:
            return await ordering.watermarks(self.ctx.redis, self.ctx.keys)
        except (RedisError, OSError) as exc:
            log.warning("deliver: no stream watermarks from Redis (%s); FIFO deliveries wait", exc)
            return None

    def _start_ready(self, only: str | None = None) -> None:
        """Starts held tasks while their destination has a free slot and the worker one too."""
        if not self.ready.count or self._stopping:  # stopping: ``close`` hands them back
            return
        cap = self.ctx.settings.deliver_per_destination
        now = time.monotonic()
        stale: list[LeasedTask] = []
        for destination_id in [only] if only is not None else self.ready.destinations():
            if destination_id in self.recorder.failing:  # its circuit decides again, at the next claim: back
                self.returns.hand_back(self.ready.take_all(destination_id))
                continue
            while self._active() < self.concurrency and self._per_destination[destination_id] < cap:
                task = self.ready.pop(destination_id, now, stale)
                if task is None:
                    break
                self._start(task)
        if stale:  # too late to start: back, or leased again when a transformed request waits
            self.returns.stale(stale)

    def _returned(self) -> None:
        """Tasks went back, or were leased again and wait in ``ready``: their destinations may be claimed for."""
        if not self._closing:
            self._start_ready()
        self._look = True
        self._wake.set()

    def _start(self, task: LeasedTask, slot: Slot | None = None) -> None:
        send_task = asyncio.create_task(self.attempts.run(task, slot), name=f"deliver:{task.id}")
        self._sends[send_task] = (task.id, task.attempts)
        self.attempts.unstarted.add(task.id)
        destination_id = task.destination_id
        self._per_destination[destination_id] += 1

        def done(finished: asyncio.Task[None]) -> None:
            self._sends.pop(finished, None)
            self.attempts.unstarted.discard(task.id)
            left = self._per_destination[destination_id] - 1
            if left > 0:
                self._per_destination[destination_id] = left
            else:
                del self._per_destination[destination_id]
            now = time.monotonic()
            self.ready.finished(destination_id, now)
            if self.ready.count:  # the next held task of this destination at once, another's if it waited
                self._start_ready(destination_id if self.ready.held(destination_id) else None)
                left = self._per_destination[destination_id]
            left += self.ready.held(destination_id) - self.ready.ahead(destination_id, now)
            if left <= self._half:
                # Claimable again. Not only at the crossing: a claim in flight while this count fell
                # through half computed its room from the old count and cleared the flag after it.
                self._room.add(destination_id)
            if (self._look or self._room) and self._free() >= self._batch:
                self._wake.set()
            if not finished.cancelled() and finished.exception() is not None:
                # Only a store away ends an attempt so (``Attempts.run``): its lease hands the task back.
                stopped = finished.exception()
                log.warning("deliver: attempt of %s stopped (%s); its lease hands it back", task.id, stopped)

        send_task.add_done_callback(done)

    def stopping(self) -> None:
        """SIGTERM (``run_loops``): the step waiting for a wakeup returns now, not at its poll (up to
        ``deliver_poll_s`` of a stop spent idle), and nothing is claimed or started after it."""
        self._stopping = True
        self._wake.set()

    async def close(self) -> None:
        """Drain: in-flight sends get ``deliver_drain_s``; the rest are cancelled and handed back, as are the
        tasks claimed ahead (uncounted: they were never sent), those whose transforms ran ahead too."""
        self._closing = True
        transforming = list(self._transforming.items())
        for work, _ in transforming:
            work.cancel()
        if transforming:
            await asyncio.wait([work for work, _ in transforming])
        await self.returns.wait()  # those leased again wait in ``ready``: handed back with them
        ahead = [task for _, (tasks, _) in transforming for task in tasks] + self.ready.take_all()
        self.returns.hand_back(ahead)
        await self.returns.wait()
        sends = len(self._sends)
        interrupted, unsent = await drain_sends(self.ctx, self._sends, self.attempts.unstarted)
        self.drained = (sends - interrupted, interrupted, unsent, len(ahead))  # for the stop line
        await self.recorder.drain(timeout_s=max(5.0, self.ctx.settings.deliver_drain_s))
        await self.transport.aclose()
        await self._notifications.aclose()
        self.transforms.close()
