"""Sending alerts: each due send (``control.db.alerts.claim``) goes out through the same egress policy and
transport as deliveries (``control.delivery``), signed with its alert destination's own secret (Standard
Webhooks; ``webhook-id`` is the alert's id, the same on every attempt and every destination, so a receiver
deduplicates retries on it), and is retried on the delivery retry schedule (``HOOKYARD_RETRY_SCHEDULE_S``).

Bodies: ``json`` is ``{"type", "timestamp", "data"}`` (the Standard Webhooks convention); ``slack`` is an
incoming-webhook body ``{"text": ...}`` whose line a person reads in a channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from control.db import alerts as db_alerts
from control.delivery import egress, retry
from control.delivery.send import Outcome, send, signature
from control.service import Context, sealed
from shared.logs import safe_url

__all__ = ("AlertSender", "body_of", "line_of", "text_of")

_LEASE_MARGIN_S = 30.0
_RESPONSE_KEPT = 2048
"""Characters of a receiver's answer kept with an attempt (what a Slack 400 says is in its first line)."""


def _subject(alert: Mapping[str, Any]) -> str:
    data = alert["data"] or {}
    if alert["destination_id"]:
        name = data.get("destination_name")
        shown = f"{name} ({alert['destination_id']})" if name else alert["destination_id"]
        return f"destination {shown} of endpoint {alert['endpoint_id']}"
    return f"endpoint {alert['endpoint_id']}"


def text_of(alert: Mapping[str, Any]) -> str:
    """The readable line of a ``slack`` body."""
    return f"hookyard alert {alert['type']}: {line_of(alert)}"


def line_of(alert: Mapping[str, Any]) -> str:
    """What is wrong, in a sentence (a ``slack`` body's line, the inbox's banner)."""
    data, subject, n = alert["data"] or {}, _subject(alert), alert["count"]
    return {
        "destination.circuit_opened": f"{subject} is failing: its circuit opened after "
        f"{data.get('consecutive_failures', n)} consecutive failed deliveries; deliveries wait until it recovers",
        "destination.recovered": f"{subject} recovered: its circuit closed and deliveries resume",
        "delivery.exhausted": f"{subject}: {n} event(s) used up their delivery retries in the hour from "
        f"{data.get('hour', '?')}",
        "endpoint.signature_failures": f"{subject}: {n} request(s) with a failed signature in the last "
        f"{int(data.get('window_s', 300)) // 60} minutes (threshold {data.get('threshold', '?')})",
        "endpoint.silent": f"{subject} received nothing for {data.get('expect_event_within_s', '?')} s "
        f"(last event: {data.get('last_event_at') or 'none in the last day'})",
        "dead_letter.added": f"{subject}: {n} record(s) could not be stored and wait in the dead letters "
        "(`hookyard dead-letters`)",
    }.get(alert["type"], f"{subject}: {alert['type']}")


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
    """Leases due sends and sends them concurrently; one instance per worker process."""

    def __init__(self, ctx: Context, *, batch: int = 50) -> None:
        s = ctx.settings
        self.ctx = ctx
        self.batch = batch
        self.lease_s = s.deliver_timeout_s + _LEASE_MARGIN_S
        self.transport = egress.client(
            s.egress, timeout_s=s.deliver_timeout_s, connect_timeout_s=s.deliver_connect_timeout_s, max_connections=20
        )

    async def step(self) -> int:
        async with self.ctx.pool.acquire() as conn:
            due = await db_alerts.claim(conn, limit=self.batch, lease_s=self.lease_s)
        if due:
            await asyncio.gather(*(self._send(dict(row)) for row in due))
        return len(due)

    async def _send(self, row: dict[str, Any]) -> None:
        if row["signing_secret"] is None:
            outcome = Outcome(status=None, latency_ms=0, sent_headers={}, permanent=True)
            outcome.error = "alert destination deleted"
        else:
            secret = sealed.open_alert_destination_secret(self.ctx, row["alert_destination_id"], row["signing_secret"])
            body = body_of(row, row["format"])
            headers = {
                "content-type": "application/json",
                "user-agent": "hookyard-alerts",
                **signature(row["alert_id"], body, secret),
            }
            outcome = await send(
                self.transport, "POST", row["url"], headers, body, total_timeout_s=self.ctx.settings.deliver_timeout_s
            )
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
        await self.transport.aclose()
