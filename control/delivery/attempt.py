"""One delivery attempt: a leased task on the wire, then in the books.

What goes out: the captured method, body and headers (minus hop-by-hop ones), the destination's headers on top,
``x-hookyard-event-id`` and ``x-hookyard-delivery-attempt``, and hookyard's own Standard Webhooks signature
(``webhook-id`` = the event id, ``webhook-timestamp`` = now, ``webhook-signature`` with the destination's secret)
unless the destination turned it off; a transform may rewrite or skip the request (``control.delivery.transforms``).
2xx is success; anything else is retried on the schedule until the attempts run out (refused egress, unusable
requests, an event no longer stored or whose body expired fail at once). A ``Retry-After`` on 429 or 503 pauses
the destination as a whole; a 410 disables it (its tasks held, this one too: ``control.db.destination_state``).
A destination with ``auth`` or ``tls_ca`` is sent to through ``control.delivery.auth`` (credentials laid over
everything else, redacted in the record); during a signing secret rotation's overlap both secrets sign. The
result goes to the ``Recorder`` synchronously, once the response is in, so a cancelled send never loses a
finished attempt's bookkeeping. An attempt that raises fails alone unless a store is away (``Attempts.run``).

Apart from the deliver loop (``control.workers.deliver``), which decides what to claim and when to start it:
this is what one start does, and the loop's module stays within its size.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from functools import partial
from typing import Any

from redis.exceptions import RedisError

from control.db.context import Context
from control.db.faults import UNAVAILABLE, describe
from control.db.leased import LeasedTask
from control.delivery import retry
from control.delivery.auth.authenticator import Authenticator
from control.delivery.auth.material import load_material
from control.delivery.recorder import Attempt, Recorder
from control.delivery.send import Outcome, delivery_row, send
from control.delivery.shaping import Shaper
from control.delivery.throttle import Slot
from control.delivery.tracing import SendSpan, attempt_span
from control.delivery.transforms import Transforms, outgoing, recorded, unsent
from control.delivery.transport import Transport
from control.records.storable import storable
from control.support import activity
from control.support import sealing as sealed
from control.support.metrics import DELIVERIES, DELIVERY_SECONDS
from control.transform.apply import Result
from shared.errors import ConfigError
from shared.logs import bind

__all__ = ("GONE", "STORE_AWAY", "Attempts")

GONE = "the destination answered 410 Gone: disabled, its deliveries held until it is enabled again"
TOLD_KEPT = 4096
"""Destinations remembered as told about a secret that does not open (``Attempts._tell_config``)."""
SECRET_UNOPENED = (
    "a secret of this destination cannot be opened by this worker (the operator's encryption keys); "
    "retried on the schedule"
)
"""What the tenant reads in a delivery's ``error`` for a ``ConfigError``: the setting's name, the column and the
key id are the operator's to read (``_tell_config`` logs them), not the tenant's."""
HELD_BACK_S = 1.0
"""A task claimed before its destination was disabled goes back this long (the claim then holds it)."""

STORE_AWAY: tuple[type[Exception], ...] = (*UNAVAILABLE, RedisError)
"""What an attempt waits out rather than fails for: Postgres or Redis away (``control.db.faults.UNAVAILABLE``),
and any Redis error (its rate limit and pauses live there)."""

log = logging.getLogger("hookyard.worker.deliver")


class Attempts:
    """Runs attempts of leased tasks with the deliver loop's transport, recorder, shaper and transforms."""

    def __init__(
        self, ctx: Context, *, transport: Transport, recorder: Recorder, shaper: Shaper, transforms: Transforms
    ) -> None:
        self.ctx = ctx
        self.transport = transport
        self.recorder = recorder
        self.shaper = shaper
        self.transforms = transforms
        self.max_attempts = retry.max_attempts(ctx.settings.retry_schedule_s)
        self._rng = random.Random()  # noqa: S311 - jitter
        self._secrets = sealed.OpenedDestinationSecrets(ctx)
        self.authenticator = Authenticator(partial(load_material, ctx))
        self.now = time.time
        """The clock a rotation's overlap is judged by (injectable: tests move it past the overlap's end)."""
        self.disabled: dict[str, float] = {}
        """Destinations disabled while this worker may hold their tasks (``time.monotonic()`` it was told), so a
        task claimed before that is handed back rather than sent (``Deliver.destination_disabled``)."""
        self._told_config: dict[str, str] = {}
        """Destinations whose secret does not open here, with what was logged (``_tell_config``)."""
        self.unstarted: set[str] = set()
        """Tasks whose attempt runs (``Deliver._start`` adds them) and has put nothing on the wire yet: waiting
        for its rate's start, or its transform's call still queued in the sandbox pool. A drain that cuts such
        an attempt off hands its task back uncounted (``tasks.hand_back``): counted, as an attempt interrupted
        mid-send is (``tasks.release``), a call that never ran spent one of the schedule's attempts."""

    def _held_back(self, destination_id: str) -> bool:
        told = self.disabled.get(destination_id)
        if told is None:
            return False
        if time.monotonic() - told > self.ctx.settings.deliver_lease_s:  # every task claimed before is done by now
            del self.disabled[destination_id]
            return False
        return True

    def _signing(self, task: LeasedTask) -> str | tuple[str, ...] | None:
        """The secrets that sign this attempt: the current one, and the previous one while the overlap lasts."""
        if not task.sign_deliveries:
            return None
        destination_id = task.destination_id
        current = self._secrets.open(destination_id, task.destination_secret)
        previous, until = task.destination_previous_secret, task.destination_previous_until
        if previous is None or until is None or until.timestamp() <= self.now():
            return current
        return current, self._secrets.open(destination_id, previous, previous=True)

    def _tell_config(self, destination_id: str, exc: ConfigError) -> None:
        """One line per destination and message, no traceback: a rotation run before this worker got the new
        key fails every attempt of every destination it re-sealed, and a traceback each was pages of noise
        hiding the one thing to do (the message names the key and says it)."""
        said = str(exc)
        if self._told_config.get(destination_id) == said:
            return
        if len(self._told_config) >= TOLD_KEPT:
            self._told_config.clear()
        self._told_config[destination_id] = said
        log.error(
            "destination %s: deliveries fail until this is fixed (retried on the schedule): %s", destination_id, said
        )

    async def run(self, task: LeasedTask, slot: Slot | None = None) -> None:
        """The attempt of a leased ``task``, after waiting for its reserved start (``slot``) when its
        destination is rate-limited. Run as its own asyncio task: the ids bound for the log stay with this
        attempt's lines only.

        A store away (``STORE_AWAY``: Postgres or Redis unreachable, refusing, restarting) is waited out: the
        exception ends this run, the task stays leased and its lease hands it back (``control.workers.deliver``).
        Any other exception is a fault of this attempt (a bug, a secret that no longer opens): the attempt
        fails alone, recorded with the error and counted, and is retried on the schedule like a failed send,
        so it ends failed once the attempts run out instead of coming back with every lease."""
        bind(event_id=task.event_id, endpoint_id=task.endpoint_id, delivery_id=task.id)
        if slot is not None and not await self._started(task, slot):
            return
        if self.disabled and self._held_back(task.destination_id):
            self.transforms.forget((task.id,))  # what its transform returned ahead: never sent
            await self.shaper.hand_back([(task.id, task.attempts, HELD_BACK_S)])
            return
        s = self.ctx.settings
        attempt = task.attempts
        span = attempt_span(self.ctx.tracing, task) if self.ctx.tracing is not None else None
        if span is not None and span.ids is not None:
            bind(trace_id=span.ids[0], span_id=span.ids[1])
        started = time.monotonic()
        faulted = False
        try:
            outcome, transformed, url, body, auth_record = await self._send(task, span)
        except STORE_AWAY:
            raise
        except ConfigError as exc:  # a secret sealed under a key this process lacks: a setting, not a bug
            self._tell_config(task.destination_id, exc)  # the operator's words, with the key, in the log only
            fault = f"attempt failed inside hookyard (not sent): {SECRET_UNOPENED}"
            latency_ms = round((time.monotonic() - started) * 1000)
            outcome = Outcome(status=None, latency_ms=latency_ms, sent_headers={}, error=storable(fault))
            transformed, url, body, auth_record, faulted = None, task.destination_url, b"", None, True
        except Exception as exc:
            log.exception("attempt %d of %s raised: failed, retried on the schedule", attempt, task.id)
            fault = f"attempt failed inside hookyard (not sent, or its outcome lost): {describe(exc)}"
            latency_ms = round((time.monotonic() - started) * 1000)
            outcome = Outcome(status=None, latency_ms=latency_ms, sent_headers={}, error=storable(fault))
            transformed, url, body, auth_record, faulted = None, task.destination_url, b"", None, True
        if transformed is not None and transformed.request is None:
            outcome, status, error = unsent(transformed.record, transformed.unrun)
            retry_in_s, body = None, b""
            if transformed.unrun:  # its call never ran (no sandbox turn in time): waited out on the schedule
                status, retry_in_s, error = self.next_state(outcome, attempt)
        else:
            status, retry_in_s, error = self.next_state(outcome, attempt)
        gone = outcome.status == 410
        if gone:  # held, not failed: enabling the destination sends it again
            status, retry_in_s, error = "held", None, GONE
        pause_s = retry.parse_retry_after(outcome.retry_after) if outcome.retry_after is not None else None
        if pause_s:  # the destination asked for a pause as a whole (docs/reference/delivery.md)
            self.shaper.pause(task.destination_id, pause_s)
        if activity.enabled(s.log_activity):
            where = (task.destination_id, task.destination_url)
            kept = transformed.record if transformed is not None and transformed.request is None else None
            activity.delivered(
                task.event_id, *where, attempt, outcome.status, outcome.latency_ms, error, retry_in_s, kept, status
            )
        kind = ("success",) if outcome.success else ("error",) if outcome.status is None else ("failure",)
        DELIVERIES.inc(kind)
        DELIVERY_SECONDS.observe(outcome.latency_ms / 1000, kind)
        log.debug("attempt %d: %s in %d ms (%s)", attempt, outcome.status or outcome.error, outcome.latency_ms, status)
        row = delivery_row(
            outcome,
            body,
            endpoint_id=task.endpoint_id,
            event_id=task.event_id,
            task_id=task.id,
            destination_id=task.destination_id,
            destination_name=task.destination_name,
            destination_url=url,
            rule_id=task.rule_id,
            source="rule",
            attempt=attempt,
            transform=recorded(transformed),
            trace=span.ids if span is not None else None,
            auth=auth_record,
        )
        if span is not None:
            span.finish(outcome, delivery_id=row[0], transform=transformed.record.outcome if transformed else None)
        self.recorder.add(  # synchronous: once the response is in, nothing can cancel its bookkeeping
            Attempt(
                task_id=task.id,
                attempts=attempt,
                status=status,
                retry_in_s=retry_in_s,
                last_error=error,
                destination_id=task.destination_id,
                success=outcome.success,
                circuit=(transformed is None or transformed.request is not None) and not gone and not faulted,
                delivery=row,
                pause_s=pause_s,
                ordered=task.ordered,
                disable=GONE if gone else None,
            )
        )
        if pause_s and task.rate_limit_per_s is not None:
            await self.shaper.share_pause(task.destination_id, pause_s)

    async def _send(
        self, task: LeasedTask, span: SendSpan | None
    ) -> tuple[Outcome, Result | None, str, bytes, dict[str, Any] | None]:
        """What the attempt sent and how it went: (the outcome, what the transform did, the URL and body sent,
        the authentication record). Nothing is sent for an event no longer stored or whose body expired."""
        if not task.event_found:
            gone = Outcome(status=None, latency_ms=0, sent_headers={}, error="event no longer stored", permanent=True)
            return gone, None, task.destination_url, bytes(task.body or b""), None
        if task.body_expired_at is not None:  # the endpoint's body_retention_days passed: nothing to send
            expired = "event body expired (body_retention_days)"
            outcome = Outcome(status=None, latency_ms=0, sent_headers={}, error=expired, permanent=True)
            return outcome, None, task.destination_url, bytes(task.body or b""), None
        request, transformed = await outgoing(self.transforms, task, self._signing(task))
        if request is None:  # the transform skipped or failed it: the caller records ``unsent``
            skipped = Outcome(status=None, latency_ms=0, sent_headers={})
            return skipped, transformed, task.destination_url, bytes(task.body or b""), None
        body, timeout_s, url = request.body, self.ctx.settings.deliver_timeout_s, request.url
        if span is not None:
            span.sending(url)
            if task.propagate_trace:  # the destination's tracing continues the webhook's trace
                span.propagate(request.headers)
        args = (request.method, url, request.headers, body)
        prepared = None
        if task.auth_version is not None:
            prepared = await self.authenticator.prepare(task.destination_id, task.auth_version)
        self.unstarted.discard(task.id)  # from here on the request may reach the destination
        if prepared is None:
            return await send(self.transport, *args, total_timeout_s=timeout_s), transformed, url, body, None
        outcome, auth_record = await self.authenticator.send(self.transport, prepared, *args, total_timeout_s=timeout_s)
        return outcome, transformed, url, body, auth_record

    async def _started(self, task: LeasedTask, slot: Slot) -> bool:
        """A rate-limited send waits for its reserved start (``control.delivery.shaping``); False when it
        went back unsent instead (its destination paused meanwhile, or no start was left for it)."""
        while True:
            await asyncio.sleep(slot.at - time.monotonic())
            paused_s = self.shaper.paused_for(task.destination_id)
            if paused_s > 0:
                await self.shaper.hand_back([(task.id, task.attempts, paused_s)])
                return False
            if time.monotonic() <= slot.until:  # woke within ``LATE_S`` of the start, by Redis's clock
                return True
            again = await self.shaper.start_again(task)
            if again is None:
                return False
            slot = again

    def next_state(self, outcome: Outcome, attempt: int) -> tuple[str, float | None, str | None]:
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
