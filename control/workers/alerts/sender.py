"""Sending alerts: each due send (``control.db.alerts.claim``) goes out through the same egress policy and
transport as deliveries (``control.delivery``), signed with its alert destination's own secret (Standard
Webhooks; ``webhook-id`` is the alert's id, the same on every attempt and every destination, so a receiver
deduplicates retries on it), and is retried on the delivery retry schedule (``HOOKYARD_RETRY_SCHEDULE_S``).
Each send is its own task with its own short timeout, and what one account's destinations may hold at once
is capped (``AlertSender``), so a receiver that never answers delays only its own alerts.

Bodies: ``json`` is ``{"type", "timestamp", "data"}`` (the Standard Webhooks convention); ``slack`` is an
incoming-webhook body ``{"text": ...}`` whose line a person reads in a channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from control.db import alerts as db_alerts
from control.db.context import Context
from control.delivery import egress, retry
from control.delivery.send import Outcome, send, signature
from control.support import sealing
from control.support.alert_lines import line_of
from shared.logs import safe_url

__all__ = (
    "ALERT_TIMEOUT_S",
    "MAX_IN_FLIGHT",
    "PER_ACCOUNT",
    "PER_DESTINATION",
    "AlertSender",
    "body_of",
    "text_of",
)

log = logging.getLogger("hookyard.worker.alerts")

ALERT_TIMEOUT_S = 5.0
"""A whole alert send (connect, request, answer): an alert receiver answers at once or not at all, and a
slow one is retried on the schedule rather than held."""
PER_DESTINATION = 2
"""Sends in flight to one alert destination (across the workers, as leased)."""
PER_ACCOUNT = 8
"""Sends in flight for one account, all its alert destinations together."""
MAX_IN_FLIGHT = 128
"""Sends in flight in one worker process (its connection pool has as many slots)."""
_LEASE_MARGIN_S = 30.0
_RESPONSE_KEPT = 2048
"""Characters of a receiver's answer kept with an attempt (what a Slack 400 says is in its first line)."""


def text_of(alert: Mapping[str, Any]) -> str:
    """The readable line of a ``slack`` body."""
    return f"hookyard alert {alert['type']}: {line_of(alert)}"


def body_of(alert: Mapping[str, Any], fmt: str) -> bytes:
    if fmt == "slack":
        return msgspec.json.encode({"text": text_of(alert)})
    data = {
        "alert_id": alert["alert_id"],
        "endpoint_id": alert["endpoint_id"],
        "destination_id": alert["destination_id"],
        "count": alert["count"],
        "fired_at": alert["fired_at"],
        "resolved_at": alert["resolved_at"],
        **(alert["data"] or {}),
    }
    return msgspec.json.encode({"type": alert["type"], "timestamp": alert["fired_at"], "data": data})


class AlertSender:
    """Leases due sends and sends each in its own task; one instance per worker process.

    A send never waits for another: ``step`` starts the sends it leased and returns, each finishes (or
    times out after ``ALERT_TIMEOUT_S``) on its own. What one account's alert destinations can hold is
    bounded where sends are leased (``control.db.alerts.claim``): at most ``PER_DESTINATION`` sends in flight
    to one alert destination and ``PER_ACCOUNT`` for one account, the accounts taking turns; the process
    holds at most ``MAX_IN_FLIGHT``, and its connection pool has a slot for each, so a destination that
    accepts and never answers holds one slot until its timeout and never another account's.
    """

    def __init__(
        self,
        ctx: Context,
        *,
        batch: int = 50,
        timeout_s: float = ALERT_TIMEOUT_S,
        per_destination: int = PER_DESTINATION,
        per_account: int = PER_ACCOUNT,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        s = ctx.settings
        self.ctx = ctx
        self.batch = batch
        self.timeout_s = timeout_s
        self.per_destination, self.per_account, self.max_in_flight = per_destination, per_account, max_in_flight
        self.lease_s = timeout_s + _LEASE_MARGIN_S
        self.transport = egress.client(
            s.egress,
            timeout_s=timeout_s,
            connect_timeout_s=min(timeout_s, s.deliver_connect_timeout_s),
            max_connections=max_in_flight,
        )
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def step(self) -> int:
        """Starts the due sends there is room for; how many it started."""
        room = min(self.batch, self.max_in_flight - len(self._tasks))
        if room <= 0:
            return 0
        async with self.ctx.pool.acquire() as conn:
            due = await db_alerts.claim(
                conn,
                limit=room,
                lease_s=self.lease_s,
                per_destination=self.per_destination,
                per_account=self.per_account,
            )
        for row in due:
            task = asyncio.create_task(self._guarded(dict(row)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(due)

    async def _guarded(self, row: dict[str, Any]) -> None:
        """One send; a failure to record it (the database away) leaves it leased, retried once the lease
        ends, and is logged rather than lost in an unobserved task."""
        try:
            await self._send(row)
        except Exception:
            log.exception("alert send %s: not recorded (retried when its lease ends)", row["id"])

    async def _send(self, row: dict[str, Any]) -> None:
        if row["signing_secret"] is None:
            outcome = Outcome(status=None, latency_ms=0, sent_headers={}, permanent=True)
            outcome.error = "alert destination deleted"
        else:
            secret = sealing.open_alert_destination_secret(self.ctx, row["alert_destination_id"], row["signing_secret"])
            body = body_of(row, row["format"])
            headers = {
                "content-type": "application/json",
                "user-agent": "hookyard-alerts",
                **signature(row["alert_id"], body, secret),
            }
            outcome = await send(self.transport, "POST", row["url"], headers, body, total_timeout_s=self.timeout_s)
        delay = None
        if not outcome.success and not outcome.permanent:
            delay = retry.next_delay_s(
                row["attempts"],
                self.ctx.settings.retry_schedule_s,
                retry_after_s=retry.parse_retry_after(outcome.retry_after),
            )
        answer = outcome.response_body.decode("utf-8", "replace")[:_RESPONSE_KEPT] if outcome.response_body else None
        error = outcome.error if outcome.error is None else outcome.error.replace(row["url"], safe_url(row["url"]))
        async with self.ctx.pool.acquire() as conn:
            await db_alerts.finish(
                conn,
                send_id=row["id"],
                attempt=row["attempts"],
                started_at=datetime.fromtimestamp(outcome.started_at, UTC),
                status=outcome.status,
                latency_ms=outcome.latency_ms,
                success=outcome.success,
                error=error,
                response_body=answer,
                retry_in_s=delay,
            )

    async def close(self) -> None:
        """Lets the sends under way finish (each is bounded by its timeout), then closes the connections."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.timeout_s + 1.0)
        for task in set(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.transport.aclose()
