"""A leased task: what a deliver worker holds from its claim to its result, read once from the claim's row.

Both claim statements (``control.db.tasks``: unordered tasks; ``control.db.ordering``: FIFO heads) and the
circuit path's ``lease`` select :data:`LEASED_COLUMNS` and turn each row into a :class:`LeasedTask` here, once,
so the loop, the shaper, the attempt, the transform and the span read typed attributes rather than an
``asyncpg.Record`` by string key. Built with keywords by name, not by position: the claim statements put
their meta columns first, and a column moved in the SQL must not shift every field after it.

The cost is what the hot path can afford (ADR 0067): a Struct of 33 fields is built in about as long as the
string-key reads it replaces took, and each later read is an attribute.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import msgspec

__all__ = ("LEASED_COLUMNS", "LeasedTask", "leased")

LEASED_COLUMNS = """c.id, c.endpoint_id, c.event_id, c.event_received_at, c.rule_id, c.destination_id, c.attempts,
       c.dedup_key, e.method, e.headers, e.headers_base64, e.body, d.name AS destination_name,
       d.url AS destination_url, d.headers AS destination_headers, d.signing_secret AS destination_secret,
       d.sign_deliveries, d.rate_limit_per_s, d.deduplicate_window_s, e.idempotency_key,
       (e.id IS NOT NULL) AS event_found, e.body_expired_at, d.transform_digest, e.provider, e.event_type, e.labels,
       (c.order_key IS NOT NULL) AS ordered, coalesce(c.traceparent, e.traceparent) AS traceparent,
       d.propagate_trace, d.auth_version, d.previous_signing_secret AS destination_previous_secret,
       d.previous_secret_expires_at AS destination_previous_until, d.transform_crashed_at"""
"""What a leased task comes with (``c``: the task, ``e``: its event, ``d``: its destination): the fields of
:class:`LeasedTask`, one column each."""


class LeasedTask(msgspec.Struct, kw_only=True, frozen=True):
    """A task leased to this worker, with its event and its destination as they were at the claim. The
    event's columns are None when the event is no longer stored (``event_found`` false)."""

    id: str
    endpoint_id: str
    event_id: str
    event_received_at: datetime
    rule_id: str
    destination_id: str
    attempts: int
    """This claim's attempt number: the fencing token its result is written with."""
    dedup_key: str | None
    method: str | None
    headers: dict[str, str] | None
    headers_base64: list[str] | None
    body: bytes | None
    destination_name: str | None
    destination_url: str
    destination_headers: dict[str, str] | None
    destination_secret: str
    """Sealed (``control.support.sealing``): opened by the attempt that signs with it."""
    sign_deliveries: bool
    rate_limit_per_s: float | None
    deduplicate_window_s: int | None
    idempotency_key: str | None
    event_found: bool
    body_expired_at: datetime | None
    transform_digest: str | None
    """The version of the destination's transform (None: it has none), not its source."""
    provider: str | None
    event_type: str | None
    labels: list[dict[str, str]] | None
    ordered: bool
    """A FIFO task, whose finish lets the next of its line go."""
    traceparent: str | None
    """What its attempt's span is a child of: the routing span that made it, or the event's own span
    (``control.workers.flush_tracing``)."""
    propagate_trace: bool
    auth_version: str | None
    """Which authentication to send with (None: none; ``control.delivery.auth``), not the secrets themselves."""
    destination_previous_secret: str | None
    destination_previous_until: datetime | None
    """The previous signing secret while a rotation's overlap may last (the worker's clock decides:
    ``control.delivery.attempt``)."""
    transform_crashed_at: datetime | None


def leased(r: asyncpg.Record | dict[str, Any]) -> LeasedTask:
    """The task of a row with :data:`LEASED_COLUMNS` (other columns of the row are left out)."""
    return LeasedTask(
        id=r["id"],
        endpoint_id=r["endpoint_id"],
        event_id=r["event_id"],
        event_received_at=r["event_received_at"],
        rule_id=r["rule_id"],
        destination_id=r["destination_id"],
        attempts=r["attempts"],
        dedup_key=r["dedup_key"],
        method=r["method"],
        headers=r["headers"],
        headers_base64=r["headers_base64"],
        body=r["body"],
        destination_name=r["destination_name"],
        destination_url=r["destination_url"],
        destination_headers=r["destination_headers"],
        destination_secret=r["destination_secret"],
        sign_deliveries=r["sign_deliveries"],
        rate_limit_per_s=r["rate_limit_per_s"],
        deduplicate_window_s=r["deduplicate_window_s"],
        idempotency_key=r["idempotency_key"],
        event_found=r["event_found"],
        body_expired_at=r["body_expired_at"],
        transform_digest=r["transform_digest"],
        provider=r["provider"],
        event_type=r["event_type"],
        labels=r["labels"],
        ordered=r["ordered"],
        traceparent=r["traceparent"],
        propagate_trace=r["propagate_trace"],
        auth_version=r["auth_version"],
        destination_previous_secret=r["destination_previous_secret"],
        destination_previous_until=r["destination_previous_until"],
        transform_crashed_at=r["transform_crashed_at"],
    )
