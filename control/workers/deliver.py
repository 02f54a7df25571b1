"""Deliver: due delivery tasks → HTTP requests to their destinations, each attempt recorded.

One step: return tasks with expired leases (every ``deliver_sweep_s``), claim as many due tasks as there
are free slots (``deliver_concurrency``, at most ``deliver_per_destination`` per destination, circuit
permitting), start a send for each, and otherwise wait for a wakeup: the flush's NOTIFY (LISTEN on a
dedicated connection), a destination or the worker having room again, the next retry falling due, or
``deliver_poll_s`` at the latest. Claims are batched so that Postgres round trips do not grow with the
delivery rate: a destination at its cap is claimed for again once half of its requests finished, a full
worker once an eighth of its slots is free.

Sends share one pooled transport (``control.delivery.transport``: HTTP/1.1 keep-alive per destination, the
egress policy checked on every connection). A send forwards the captured method, body and headers (minus
hop-by-hop ones), the destination's headers on top, plus ``x-hookyard-event-id`` and
``x-hookyard-delivery-attempt``, and hookyard's own Standard Webhooks signature (``webhook-id`` = the event id,
``webhook-timestamp`` = now, ``webhook-signature`` with the destination's secret) unless the destination turned
it off; 2xx is success; anything else is retried on the schedule until the
attempts run out (refused egress and unusable requests fail at once). Results are written in batches by
the :class:`~control.delivery.recorder.Recorder`.

Stopping (``close``, after SIGTERM): no new claims; in-flight sends get ``deliver_drain_s`` to finish,
the rest are cancelled and handed back (due at once; had that failed, the lease expiry would do it).

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

What remains: a worker that was killed during the outage (its tasks are sent again after the lease, as
after any crash), a Recorder that still cannot write after the grace (Postgres back but failing its
writes), and a worker started right at the end of an outage, which saw no failure to wait after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter

import asyncpg
import msgspec

from control.db import tasks as db_tasks
from control.delivery import egress, retry
from control.delivery.claim import claim
from control.delivery.recorder import RETRY_CAP_S, Attempt, Recorder
from control.delivery.send import Outcome, delivery_row, forwardable, merge, send, signature
from control.delivery.storable import storable
from control.delivery.wakeup import TaskNotifications
from control.events_text import captured_headers
from control.service import Context, sealed
from control.service.metrics import DELIVERIES, DELIVERY_SECONDS
from control.service.transforms import unsent
from control.transform.apply import Outgoing
from control.workers import activity
from control.workers.transforms import Transforms
from shared.logs import bind

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
        self.max_attempts = retry.max_attempts(s.retry_schedule_s)
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
        self._look = True  # something may be claimable (a notification, a freed destination, a timer)
        self._quiet_until = 0.0
        self._due_at: float | None = None  # monotonic time the next pending task falls due, when known
        self._wake = asyncio.Event()
        self.recorder = Recorder(ctx, on_written=self._written)
        self.transforms = Transforms(ctx)
        self._notifications = TaskNotifications(s.database_url or "", self._notified)
        self._sends: dict[asyncio.Task[None], tuple[str, int]] = {}  # send → (task id, attempts)
        self._per_destination: Counter[str] = Counter()
        self._next_sweep = 0.0
        self._trouble_at = float("-inf")  # monotonic time this worker's step last failed
        self._waiting_for_recorder = False
        self._rng = random.Random()  # noqa: S311 - jitter

    @property
    def in_flight(self) -> int:
        return len(self._sends)

    def _free(self) -> int:
        # Results still waiting to be written count as busy: an outage must not pile them up in memory.
        return self.concurrency - len(self._sends) - self.recorder.queued

    def _notified(self) -> None:
        self._look = True
        self._wake.set()

    def _written(self, had_failures: bool) -> None:
        if had_failures:  # destinations whose failures were waiting to be counted are claimable again
            self._look = True
        if self._waiting_for_recorder and not self.recorder.stalled:
            self._look = True
            self._wake.set()
        if self._look and self._free() >= self._batch:
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
            held = [task_id for task_id, _ in self._sends.values()]
            held.extend(self.recorder.task_ids())
            async with self.ctx.pool.acquire() as conn:
                swept = await db_tasks.sweep_expired(conn, max_attempts=self.max_attempts, exclude=held)
            if swept:
                log.warning("deliver: %d tasks had an expired lease (a worker stopped mid-attempt); due again", swept)
                self._look = True
        now = time.monotonic()
        wait_s = s.deliver_poll_s
        free = self._free()
        if self._look and free >= self._batch:
            blocked = [d for d, n in self._per_destination.items() if n > self._half]
            blocked.extend(self.recorder.failing)
            if blocked and now < self._quiet_until:
                # Skipping a busy destination's backlog costs a scan of it: at most every 50 ms.
                wait_s = self._quiet_until - now
            else:
                self._quiet_until = now + 0.05 if blocked else 0.0
                self._look = False
                claimed, due_in_s = await self._claim(free, blocked)
                self._due_at = None if due_in_s is None else time.monotonic() + due_in_s
                if len(claimed) == free:
                    self._look = True  # there may be more
                if claimed:
                    return len(claimed)
        if self._due_at is not None:
            wait_s = min(wait_s, max(0.0, self._due_at - now) + 0.001)
        try:
            await asyncio.wait_for(self._wake.wait(), wait_s)
        except TimeoutError:
            self._look = True  # the poll: a lost notification, a retry or push-back falling due
            self._due_at = None
        return 0

    async def _claim(self, free: int, blocked: list[str]) -> tuple[list[asyncpg.Record], float | None]:
        s = self.ctx.settings
        async with self.ctx.pool.acquire() as conn:
            claimed, due_in_s = await claim(
                conn,
                free=free,
                in_flight=self._per_destination,
                per_destination=s.deliver_per_destination,
                blocked=blocked,
                lease_s=s.deliver_lease_s,
                cooldown_s=s.circuit_cooldown_s,
            )
        for task in claimed:
            self._start(task)
        return claimed, due_in_s

    def _start(self, task: asyncpg.Record) -> None:
        send_task = asyncio.create_task(self._attempt(task), name=f"deliver:{task['id']}")
        self._sends[send_task] = (task["id"], task["attempts"])
        destination_id = task["destination_id"]
        self._per_destination[destination_id] += 1

        def done(finished: asyncio.Task[None]) -> None:
            self._sends.pop(finished, None)
            left = self._per_destination[destination_id] - 1
            if left > 0:
                self._per_destination[destination_id] = left
            else:
                del self._per_destination[destination_id]
            if left <= self._half:
                # Claimable again. Not only at the crossing: a claim in flight while this count fell
                # through half computed its room from the old count and cleared the flag after it.
                self._look = True
            if self._look and self._free() >= self._batch:
                self._wake.set()
            if not finished.cancelled() and finished.exception() is not None:
                log.error("deliver: attempt of %s failed unexpectedly", task["id"], exc_info=finished.exception())

        send_task.add_done_callback(done)

    async def _attempt(self, task: asyncpg.Record) -> None:
        # Its own asyncio task: the ids stay with this attempt's log lines only.
        bind(event_id=task["event_id"], endpoint_id=task["endpoint_id"], delivery_id=task["id"])
        s = self.ctx.settings
        attempt = task["attempts"]
        body = bytes(task["body"] or b"")
        transformed = None
        if not task["event_found"]:
            outcome = Outcome(
                status=None, latency_ms=0, sent_headers={}, error="event no longer stored", permanent=True
            )
        else:
            request = Outgoing(
                task["method"],
                task["destination_url"],
                merge(
                    forwardable(captured_headers(task["headers"] or {}, task["headers_base64"])),
                    task["destination_headers"],
                ),
                body,
            )
            if task["transform_digest"] is not None:  # the signature below is over what the transform returned
                transformed = await self.transforms.apply(task, request)
                request = transformed.request if transformed is not None else request
            if request is not None:
                body = request.body
                headers = merge(
                    request.headers,
                    signature(task["event_id"], body, self._secret(task)) if task["sign_deliveries"] else None,
                    {"x-hookyard-event-id": task["event_id"], "x-hookyard-delivery-attempt": str(attempt)},
                )
                url, timeout_s = request.url, s.deliver_timeout_s
                outcome = await send(self.transport, request.method, url, headers, body, total_timeout_s=timeout_s)
        if transformed is not None and transformed.request is None:
            outcome, status, error = unsent(transformed.record)
            retry_in_s, body = None, b""
        else:
            status, retry_in_s, error = self._next(outcome, attempt)
        if activity.enabled(s.log_activity):
            where = (task["destination_id"], task["destination_url"])
            activity.delivered(task["event_id"], *where, attempt, outcome.status, outcome.latency_ms, error, retry_in_s)
        kind = ("success",) if outcome.success else ("error",) if outcome.status is None else ("failure",)
        DELIVERIES.inc(kind)
        DELIVERY_SECONDS.observe(outcome.latency_ms / 1000, kind)
        log.debug("attempt %d: %s in %d ms (%s)", attempt, outcome.status or outcome.error, outcome.latency_ms, status)
        self.recorder.add(  # synchronous: once the response is in, nothing can cancel its bookkeeping
            Attempt(
                task_id=task["id"],
                attempts=attempt,
                status=status,
                retry_in_s=retry_in_s,
                last_error=error,
                destination_id=task["destination_id"],
                success=outcome.success,
                circuit=transformed is None or transformed.request is not None,
                delivery=delivery_row(
                    outcome,
                    body,
                    endpoint_id=task["endpoint_id"],
                    event_id=task["event_id"],
                    task_id=task["id"],
                    destination_id=task["destination_id"],
                    destination_name=task["destination_name"],
                    destination_url=task["destination_url"],
                    rule_id=task["rule_id"],
                    source="rule",
                    attempt=attempt,
                    transform=None if transformed is None else msgspec.to_builtins(transformed.record),
                ),
            )
        )

    def _secret(self, task: asyncpg.Record) -> str:
        return sealed.open_destination_secret(self.ctx, task["destination_id"], task["destination_secret"])

    def _next(self, outcome: Outcome, attempt: int) -> tuple[str, float | None, str | None]:
        """(task status, seconds to the retry, last_error) after this attempt."""
        if outcome.success:
            return "succeeded", None, None
        error = storable(outcome.error) or f"HTTP {outcome.status}"
        if outcome.permanent:
            return "failed", None, error
        delay = retry.next_delay_s(
            attempt,
            self.ctx.settings.retry_schedule_s,
            retry_after_s=retry.parse_retry_after(outcome.retry_after),
            rng=self._rng,
        )
        if delay is None:
            return "failed", None, f"{error} (attempt {attempt} of {self.max_attempts}, no attempts left)"
        return "pending", delay, error

    async def close(self) -> None:
        """Drain: in-flight sends get ``deliver_drain_s``; the rest are cancelled and handed back."""
        if self._sends:
            log.info("deliver: draining %d in-flight sends", len(self._sends))
            _, late = await asyncio.wait(set(self._sends), timeout=self.ctx.settings.deliver_drain_s)
            if late:
                interrupted = [self._sends[t] for t in late if t in self._sends]
                for send_task in late:
                    send_task.cancel()
                await asyncio.wait(late)
                try:
                    async with self.ctx.pool.acquire() as conn:
                        await db_tasks.release(conn, interrupted)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.warning("deliver: could not hand back %d tasks (%s); their lease will", len(interrupted), exc)
        await self.recorder.drain(timeout_s=max(5.0, self.ctx.settings.deliver_drain_s))
        await self.transport.aclose()
        await self._notifications.aclose()
        self.transforms.close()
