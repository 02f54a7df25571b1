"""What the flush writes on a task for a destination that shapes its deliveries (issue 27; the design:
docs/adr/0036-delivery-shaping-state.md): the FIFO queue it waits in, its place in that queue, and the
idempotency key it is deduplicated by. Tasks of every other destination carry none of it (nulls), and a
batch whose endpoints have no such destination is routed exactly as before.

- ``order_key``: ``''`` for a destination ordered as a whole, else ``'k:'`` and the text form of the value of
  its ``ordering_key`` (``control.routing.conditions.text_form``; an event without it waits in the ``''``
  queue). A value longer than ``MAX_KEY_CHARS`` is replaced by its SHA-256, so the index stays small.
- ``order_pos``: where the event entered the ingest stream, ``'<shard, 5 digits>:<entry id>'`` with both parts
  of the entry id zero-padded to 20 digits, so text order is stream order. The stream's order is the order
  of receipt that every process agrees on (two edges' clocks need not); records of one entry are told apart
  by ``received_at`` and the event id, which the claim orders by next. The deliver workers release the head
  of a queue only once every earlier entry of its shard is committed (``control.delivery.ordering``).
- ``dedup_key``: the event's ``idempotency_key`` when the destination deduplicates (no key: nothing to
  deduplicate by).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import asyncpg

from control.db.ordering import position
from control.routing.conditions import MISSING, EventView, Getter, getter, text_form

__all__ = ("MAX_KEY_CHARS", "NO_KEYS", "Shaping", "compile_shaping", "position")

MAX_KEY_CHARS = 200
NO_KEYS: tuple[None, None, None] = (None, None, None)
"""``(order_key, order_pos, dedup_key)`` of a task whose destination does not shape."""


@dataclass(frozen=True, slots=True)
class Shaping:
    """What one destination asks of the tasks routed to it."""

    fifo: bool
    key: Getter | None
    """Reads the ordering key from an event; None: one queue for the destination."""
    key_field: str | None
    dedup: bool

    @property
    def reads(self) -> str | None:
        """``body`` or ``meta`` when the ordering key reads that part of the event (the router then builds it)."""
        if self.key_field is None:
            return None
        kind = self.key_field.split(".", 1)[0]
        return kind if kind in ("body", "meta") else None

    def keys(
        self, view: EventView | None, idempotency_key: str | None, pos: str | None
    ) -> tuple[str | None, str | None, str | None]:
        """``(order_key, order_pos, dedup_key)`` of a task of this destination for the event seen as ``view``
        (None only when the key reads nothing the router had to build: a header key is read from it too)."""
        order_key = None
        if self.fifo:
            order_key = ""
            if self.key is not None and view is not None:
                value = self.key(view)
                if value is not MISSING:
                    text = text_form(value)
                    if len(text) > MAX_KEY_CHARS:
                        text = "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
                    order_key = "k:" + text
        return (
            order_key,
            pos if self.fifo else None,
            idempotency_key if self.dedup and idempotency_key else None,
        )


def compile_shaping(rows: Sequence[Mapping[str, object] | asyncpg.Record]) -> dict[str, dict[str, Shaping]]:
    """``{endpoint id: {destination id: Shaping}}`` from ``control.db.routing.shaping`` rows."""
    out: dict[str, dict[str, Shaping]] = {}
    for row in rows:
        field = row["ordering_key"]
        fifo = row["ordering"] == "fifo"
        shaping = Shaping(
            fifo=fifo,
            key=getter(field) if fifo and isinstance(field, str) else None,
            key_field=field if fifo and isinstance(field, str) else None,
            dedup=row["deduplicate_window_s"] is not None,
        )
        out.setdefault(str(row["endpoint_id"]), {})[str(row["destination_id"])] = shaping
    return out
