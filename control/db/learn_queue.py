"""The schema learning queue (migration 0024): the flush's notes of new events, taken by the learn worker.

Notes are written by ``control.db.flush.store_batch`` in the statement that inserts the events (a CTE of it:
no round trip of its own), and deleted by the learn worker in the transaction that writes what it learned
from them (``control.workers.learn``): exactly once, with no marker per event.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg

__all__ = ("GATE", "LEARN_COLUMNS", "Note", "backlog", "close_gate", "events", "forget", "pass_gate", "take")

LEARN_COLUMNS = ("id", "endpoint_id", "received_at", "body", "provider", "event_type", "signature_valid", "ip_allowed")
"""What learning reads of an event, in this order (``control.schemas.learn``)."""


GATE = 0x68_79_6C_65_61_72_6E
"""The advisory lock between learners and erasures: a learner's step holds it shared from before it reads
events until its commit, an erasure takes it exclusively before it deletes events (``close_gate``). It
replaced a ``FOR KEY SHARE`` on every event a learner read: one lock per step instead of a heap write and a
WAL record per event (ADR 0041, amendment of 2026-11-29)."""


async def pass_gate(conn: asyncpg.Connection) -> None:
    """Holds the gate shared until the caller's transaction ends; waits while an erasure holds it. Its own
    statement, before the read: the read's snapshot must be taken after the wait, so that it does not see
    events an erasure deleted meanwhile."""
    await conn.execute("SELECT pg_advisory_xact_lock_shared($1)", GATE)


async def close_gate(conn: asyncpg.Connection) -> None:
    """Holds the gate exclusively until the caller's transaction ends: waits for every learner's step that
    may have read the events about to be deleted to commit what it learned, and keeps new steps from reading
    until then."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", GATE)


class Note(NamedTuple):
    id: int
    event_ids: list[str]
    first_at: datetime
    last_at: datetime


async def take(conn: asyncpg.Connection, limit: int) -> list[Note]:
    """The oldest notes no other learner holds, locked until the caller's transaction ends."""
    rows = await conn.fetch(
        """SELECT id, event_ids, first_at, last_at FROM schema_learn_queue
            ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED""",
        limit,
    )
    return [Note(*r) for r in rows]


async def events(conn: asyncpg.Connection, notes: list[Note]) -> list[asyncpg.Record]:
    """The noted events still stored, in ``LEARN_COLUMNS`` order, by arrival (the order learning sees them).

    The caller has passed the gate (``pass_gate``) in its transaction, so an erasure cannot delete an event
    between this read and the commit of what was learned from it: the erasure waits for that commit and its
    later scrub of the schemas removes what was learned (``control.service.erasure_jobs``), or it deleted the
    event first and this finds none. No row is locked: body retention's in-place update and the flush's
    insert of a re-processed entry never wait for a learner."""
    ids = [i for n in notes for i in n.event_ids]
    return await conn.fetch(
        f"""SELECT {", ".join(LEARN_COLUMNS)} FROM events
             WHERE id = any($1::text[]) AND received_at BETWEEN $2 AND $3
             ORDER BY received_at, id""",
        ids,
        min(n.first_at for n in notes),
        max(n.last_at for n in notes),
    )


async def forget(conn: asyncpg.Connection, note_ids: list[int]) -> None:
    await conn.execute("DELETE FROM schema_learn_queue WHERE id = any($1::bigint[])", note_ids)


async def backlog(conn: asyncpg.Connection) -> tuple[int, int, float | None]:
    """(notes, events, seconds since the oldest was noted): how far learning is behind."""
    row = await conn.fetchrow(
        """SELECT count(*), coalesce(sum(cardinality(event_ids)), 0),
                  extract(epoch FROM now() - min(noted_at))::float8 FROM schema_learn_queue"""
    )
    return row[0], row[1], row[2]
