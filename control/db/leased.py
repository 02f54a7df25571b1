"""A leased task: what a deliver worker holds from its claim to its result, read once from the claim's row.

Both claim statements (``control.db.tasks``: unordered tasks; ``control.db.ordering``: FIFO heads) and the
circuit path's ``lease`` select :data:`LEASED_COLUMNS` and turn each row into a :class:`LeasedTask` here, once,
so the loop, the shaper, the attempt, the transform and the span read typed attributes rather than an
``asyncpg.Record`` by string key.

Made by position, checked by name: :data:`LEASED_COLUMNS` is written from the Struct's fields in their order,
the columns are found in a row by the name of the first (the claim statements put their meta columns
before them) and compared with the fields once per call, and then every row's slice of values becomes a
task in one ``msgspec.convert``, which checks each value's type in C. Reading 33 columns by name and calling
the Struct with keywords cost 3.5-5.2 µs per row, this 1.2-1.6 (ADR 0064, 2026-12-03 evening): the claim's
rows decoded straight into Structs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg
import msgspec

__all__ = ("LEASED_COLUMNS", "LeasedTask", "leased")


class LeasedTask(msgspec.Struct, kw_only=True, frozen=True, array_like=True):
    """A task leased to this worker, with its event and its destination as they were at the claim. The
    event's columns are None when the event is no longer stored (``event_found`` false). ``array_like``: made
    from a row's values in field order (:func:`leased`), never encoded."""

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
    account_id: str
    """The destination's account (its endpoint's): what the deliver loop's share per account counts
    (docs/adr/0093-a-fair-share-of-the-deliver-loop.md)."""


_EXPRESSIONS = {
    "id": "c.id",
    "endpoint_id": "c.endpoint_id",
    "event_id": "c.event_id",
    "event_received_at": "c.event_received_at",
    "rule_id": "c.rule_id",
    "destination_id": "c.destination_id",
    "attempts": "c.attempts",
    "dedup_key": "c.dedup_key",
    "method": "e.method",
    "headers": "e.headers",
    "headers_base64": "e.headers_base64",
    "body": "e.body",
    "destination_name": "d.name",
    "destination_url": "d.url",
    "destination_headers": "d.headers",
    "destination_secret": "d.signing_secret",
    "sign_deliveries": "d.sign_deliveries",
    "rate_limit_per_s": "d.rate_limit_per_s",
    "deduplicate_window_s": "d.deduplicate_window_s",
    "idempotency_key": "e.idempotency_key",
    "event_found": "(e.id IS NOT NULL)",
    "body_expired_at": "e.body_expired_at",
    "transform_digest": "d.transform_digest",
    "provider": "e.provider",
    "event_type": "e.event_type",
    "labels": "e.labels",
    "ordered": "(c.order_key IS NOT NULL)",
    "traceparent": "coalesce(c.traceparent, e.traceparent)",
    "propagate_trace": "d.propagate_trace",
    "auth_version": "d.auth_version",
    "destination_previous_secret": "d.previous_signing_secret",
    "destination_previous_until": "d.previous_secret_expires_at",
    "transform_crashed_at": "d.transform_crashed_at",
    "account_id": "d.account_id",
}
"""Each field of :class:`LeasedTask` as the SQL that gives it (``c``: the task, ``e``: its event, ``d``: its
destination)."""
_FIELDS = LeasedTask.__struct_fields__
if set(_EXPRESSIONS) != set(_FIELDS):
    raise RuntimeError(f"LeasedTask's fields and their SQL differ: {set(_EXPRESSIONS) ^ set(_FIELDS)}")
LEASED_COLUMNS = ", ".join(f"{_EXPRESSIONS[name]} AS {name}" for name in _FIELDS)
"""What a leased task comes with: the fields of :class:`LeasedTask`, one column each, in its fields' order
(written from them, so a column cannot drift from its field)."""
_TYPE = list[LeasedTask]


def leased(rows: Sequence[asyncpg.Record]) -> list[LeasedTask]:
    """The tasks of rows that carry :data:`LEASED_COLUMNS` (other columns around them are left out, rows whose
    ``id`` is null too: a claim's meta row), in one ``msgspec.convert`` of each row's slice of values: the
    columns are found by name once per call (an error if they are not ``LEASED_COLUMNS`` in order), each
    value checked against its field's type in C."""
    if not rows:
        return []
    names = list(rows[0].keys())
    first = names.index("id")
    end = first + len(_FIELDS)
    if tuple(names[first:end]) != _FIELDS:
        raise ValueError(f"not the columns of a leased task, in order: {names}")
    return msgspec.convert([r[first:end] for r in rows if r[first] is not None], _TYPE)
