"""Forwards ``hookyard listen`` made, recorded on their events as deliveries of source ``listen``.

The CLI sends each event to the developer's local app itself (the control plane cannot reach the laptop's
``localhost``) and then reports the attempt here, so every view of an event's attempts (``hookyard tail``, the
inbox, ``GET /v1/events/{id}``, the deliveries list) shows what reached the app beside the replays. The report
is the caller's own account's claim about its own event: checked for shape, stored as given, never counted in
a destination's stats (it has no destination) and never retried (``control.service.retries`` says to replay
it instead). The URL it reached becomes the endpoint's replay target, the URL the inbox's replay box starts with
(``remember_target``).
"""

from __future__ import annotations

import re

from control.db import deliveries as db_deliveries
from control.db import delivery_records
from control.db.context import Context, Principal
from control.delivery.send import Outcome, delivery_row
from control.records.deliveries import Delivery
from control.records.forwards import ForwardReport
from control.records.storable import check_text
from control.service.deliveries import delivery_record
from control.service.endpoints import require_event, require_write
from control.support.url_checks import check_url
from shared.errors import NotFoundError, ValidationError

__all__ = ("record_forward", "remember_target", "replay_target")

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")
_VALUE = re.compile(r"[\t\x20-\x7e\x80-\ud7ff\ue000-\U0010ffff]*")
_MAX_HEADERS = 200
_TARGET_TTL_S = 86_400
"""Per retention day: the replay target lives as long as the records that name it."""


def _sent_headers(headers: dict[str, str]) -> dict[str, str]:
    if len(headers) > _MAX_HEADERS:
        raise ValidationError(f"sent_headers: at most {_MAX_HEADERS} headers, got {len(headers)}")
    out = {}
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise ValidationError(f"sent_headers.{name[:100]}: not a valid header name")
        if not _VALUE.fullmatch(value):
            raise ValidationError(
                f"sent_headers.{name}: control characters (CR, LF, NUL...) and lone surrogates are not allowed"
            )
        out[name.lower()] = value
    return out


async def record_forward(ctx: Context, principal: Principal, event_id: str, data: ForwardReport) -> Delivery:
    """Records one forward of the event as a delivery of source ``listen``; answers it as the deliveries
    list shows it."""
    require_write(principal)
    url = check_url(data.url, where="url")
    sent = _sent_headers(data.sent_headers)
    if data.status is None and data.error is None:
        raise ValidationError("error: say why no response came back when status is null")
    check_text(data.error, "error")
    async with ctx.pool.acquire() as conn:
        row = await require_event(conn, principal, event_id)
        response = data.response_body.encode("utf-8", "replace") if data.response_body is not None else None
        outcome = Outcome(
            status=data.status, latency_ms=data.latency_ms, sent_headers=sent, response_body=response, error=data.error
        )
        record = delivery_row(
            outcome,
            b"",
            endpoint_id=row["endpoint_id"],
            event_id=row["id"],
            task_id=None,
            destination_id=None,
            destination_name=None,
            destination_url=url,
            rule_id=None,
            source="listen",
            attempt=1,
        )
        if not await delivery_records.insert_for_event(conn, record, row["received_at"]):
            raise NotFoundError(f"event {event_id!r} not found")
        stored = await db_deliveries.one(conn, row["endpoint_id"], record[0])
    await remember_target(ctx, row["endpoint_id"], url)
    assert stored is not None  # written just now, in this account
    return delivery_record(stored)


async def remember_target(ctx: Context, endpoint_id: str, url: str) -> None:
    """The URL an endpoint's events were last sent to by hand or by ``listen``: the inbox's replay box
    starts with it. A hint in Redis (one short string per endpoint, expiring), not a record."""
    await ctx.redis.set(ctx.keys.replay_target(endpoint_id), url, ex=_TARGET_TTL_S * ctx.settings.retention_days)


async def replay_target(ctx: Context, endpoint_id: str) -> str | None:
    found = await ctx.redis.get(ctx.keys.replay_target(endpoint_id))
    return found.decode() if isinstance(found, bytes) else found
