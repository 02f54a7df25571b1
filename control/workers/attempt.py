"""One delivery attempt: a leased task on the wire, then in the books.

What goes out: the captured method, body and headers (minus hop-by-hop ones), the destination's headers on top,
``x-hookyard-event-id`` and ``x-hookyard-delivery-attempt``, and hookyard's own Standard Webhooks signature
(``webhook-id`` = the event id, ``webhook-timestamp`` = now, ``webhook-signature`` with the destination's secret)
unless the destination turned it off; a transform may rewrite or skip the request (``control.workers.transforms``).
2xx is success; anything else is retried on the schedule until the attempts run out (refused egress, unusable
requests, an event no longer stored or whose body expired fail at once). A ``Retry-After`` on 429 or 503 pauses
the destination as a whole. The result goes to the ``Recorder`` synchronously, once the response is in, so a
cancelled send never loses a finished attempt's bookkeeping.

Apart from the deliver loop (``control.workers.deliver``), which decides what to claim and when to start it:
this is what one start does, and the loop's module stays within its size.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

import asyncpg

from control.delivery import retry
from control.delivery.recorder import Attempt, Recorder
from control.delivery.send import Outcome, delivery_row, send
from control.delivery.shaping import LATE_S, Shaper
from control.delivery.transport import Transport
from control.records.storable import storable
from control.service import Context, sealed
from control.service.metrics import DELIVERIES, DELIVERY_SECONDS
from control.service.transforms import unsent
from control.workers import activity
from control.workers.transforms import Transforms, outgoing, recorded
from shared.logs import bind

__all__ = ("Attempts",)

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

    async def run(self, task: asyncpg.Record, start_at: float = 0.0) -> None:
        """The attempt of a leased ``task`` (``control.db.tasks.LEASED_COLUMNS``), after waiting for
        ``start_at`` (``time.monotonic()``) when its destination is rate-limited. Run as its own asyncio
        task: the ids bound for the log stay with this attempt's lines only."""
        bind(event_id=task["event_id"], endpoint_id=task["endpoint_id"], delivery_id=task["id"])
        if start_at and not await self._started(task, start_at):
            return
        s = self.ctx.settings
        attempt = task["attempts"]
        body = bytes(task["body"] or b"")
        transformed, url = None, task["destination_url"]  # a transform's path or query changes the URL sent
        if not task["event_found"]:
            outcome = Outcome(
                status=None, latency_ms=0, sent_headers={}, error="event no longer stored", permanent=True
            )
        elif task["body_expired_at"] is not None:  # the endpoint's body_retention_days passed: nothing to send
            outcome = Outcome(
                status=None,
                latency_ms=0,
                sent_headers={},
                error="event body expired (body_retention_days)",
                permanent=True,
            )
        else:
            sealed_secret = (task["destination_id"], task["destination_secret"])
            secret = self._secrets.open(*sealed_secret) if task["sign_deliveries"] else None
            request, transformed = await outgoing(self.transforms, task, secret)
            if request is not None:
                body, timeout_s, url = request.body, s.deliver_timeout_s, request.url
                args = (request.method, url, request.headers, body)
                outcome = await send(self.transport, *args, total_timeout_s=timeout_s)
        if transformed is not None and transformed.request is None:
            outcome, status, error = unsent(transformed.record)
            retry_in_s, body = None, b""
        else:
            status, retry_in_s, error = self.next_state(outcome, attempt)
        pause_s = retry.parse_retry_after(outcome.retry_after) if outcome.retry_after is not None else None
        if pause_s:  # the destination asked for a pause as a whole (docs/reference/delivery.md)
            self.shaper.pause(task["destination_id"], pause_s)
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
                    destination_url=url,
                    rule_id=task["rule_id"],
                    source="rule",
                    attempt=attempt,
                    transform=recorded(transformed),
                ),
                pause_s=pause_s,
                ordered=task["ordered"],
            )
        )
        if pause_s and task["rate_limit_per_s"] is not None:
            await self.shaper.share_pause(task["destination_id"], pause_s)

    async def _started(self, task: asyncpg.Record, start_at: float) -> bool:
        """A rate-limited send waits for its reserved start (``control.delivery.shaping``); False when it
        went back unsent instead (its destination paused meanwhile, or no start was left for it)."""
        while True:
            await asyncio.sleep(start_at - time.monotonic())
            paused_s = self.shaper.paused_for(task["destination_id"])
            if paused_s > 0:
                await self.shaper.hand_back([(task["id"], task["attempts"], paused_s)])
                return False
            if time.monotonic() - start_at <= LATE_S:
                return True
            again = await self.shaper.start_again(task)
            if again is None:
                return False
            start_at = again

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
