"""The schema learning queue (migration 0024): the flush's notes of new events, taken by the learn worker.

Notes are written by ``control.db.flush.store_batch`` in the statement that inserts the events (a CTE of it:
no round trip of its own), and deleted by the learn worker in the transaction that writes what it learned
from them (``control.workers.learn``): exactly once, with no marker per event.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias

import asyncpg

from control.db.connection import Connection, returned

__all__ = ("LEARN_COLUMNS", "LearnRow", "Note", "backlog", "events", "forget", "take")

LEARN_COLUMNS = ("id", "endpoint_id", "received_at", "body", "provider", "event_type", "signature_valid", "ip_allowed")
"""What learning reads of an event, in this order (``control.schemas.learn``)."""

LearnRow: TypeAlias = asyncpg.Record | Sequence[Any]
"""An event as learning reads it, by position in ``LEARN_COLUMNS`` order: the record ``events`` fetched, or a
tuple made in code (the stubs do not make the record a ``Sequence``)."""


class Note(NamedTuple):
    id: int
    event_ids: list[str]
    first_at: datetime
    last_at: datetime


async def take(conn: Connection, limit: int) -> list[Note]:
    """The oldest notes no other learner holds, locked until the caller's transaction ends."""
    rows = await conn.fetch(
        """SELECT id, event_ids, first_at, last_at FROM schema_learn_queue
            ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED""",
        limit,
    )
    return [Note(*r) for r in rows]


async def events(conn: Connection, notes: list[Note]) -> list[asyncpg.Record]:
    """The noted events still stored, in ``LEARN_COLUMNS`` order, by arrival (the order learning sees them).

    Locked ``FOR KEY SHARE`` until the caller's transaction ends, so an erasure cannot delete an event
    between this read and the commit of what was learned from it: its DELETE waits for that commit and its
    later scrub of the schemas removes what was learned (``control.workers.erasures.step``), or it deleted the
    event first and this finds none. KEY SHARE, not SHARE: body retention's in-place update of expired
    bodies (``control.db.retention``) changes no key and does not wait, nor does the flush's insert of a
    re-processed entry (``ON CONFLICT DO NOTHING``). The rows are locked in (received_at, id) order, the
    order ``control.db.erasures.erase`` locks the events it deletes in, so the two never deadlock."""
    ids = [i for n in notes for i in n.event_ids]
    return await conn.fetch(
        f"""SELECT {", ".join(LEARN_COLUMNS)} FROM events
             WHERE id = any($1::text[]) AND received_at BETWEEN $2 AND $3
             ORDER BY received_at, id
               FOR KEY SHARE""",
        ids,
        min(n.first_at for n in notes),
        max(n.last_at for n in notes),
    )


async def forget(conn: Connection, note_ids: list[int]) -> None:
    await conn.execute("DELETE FROM schema_learn_queue WHERE id = any($1::bigint[])", note_ids)


async def backlog(conn: Connection) -> tuple[int, int, float | None]:
    """(notes, events, seconds since the oldest was noted): how far learning is behind."""
    row = returned(
        await conn.fetchrow(
            """SELECT count(*), coalesce(sum(cardinality(event_ids)), 0),
                  extract(epoch FROM now() - min(noted_at))::float8 FROM schema_learn_queue"""
        )
    )
    return row[0], row[1], row[2]
