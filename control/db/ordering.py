"""FIFO destinations' tasks: claimed only at the head of their line (issue 27; the design:
docs/adr/0036-delivery-shaping-state.md).

A line is a destination's unfinished tasks with one ``order_key`` (``control.routing.shaping``), in the
order of their ``order_pos`` (the stream position of their event). Its head is the first of them; the others
wait. A head is claimed when it is pending and due, its destination not blocked, and the stream watermark of
its shard has passed it (every earlier entry of the shard is committed, so no earlier event of its line can
still turn up); a head in flight, or pending with a retry later, holds its line back. Once it succeeds or
fails for good it leaves the index and the next task is the head.

Heads are found through ``delivery_tasks_fifo`` (only unfinished FIFO tasks), one index probe per line, so
nothing here reads an unordered task or the tail of a line, and the claim statement below runs only when
some FIFO task is pending (the unordered claim says so). Correct under concurrency without locks of its own:
a worker computes heads from its snapshot and locks them with SKIP LOCKED, rechecking ``status =
'pending'``; a task becomes a head only once the task before it finished, which no worker's older snapshot
can show finished too early.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import asyncpg

from control.db.connection import Connection
from control.db.leased import LeasedTask, leased
from control.db.tasks import CANDIDATE_GATE, CIRCUIT, NOT_BLOCKED_ACCOUNT, Claim, claim_statement, window_for

__all__ = ("claim_heads", "entry_position", "head_candidates", "position")


def position(shard: int, entry_id: str) -> str:
    """A stream position as ``order_pos`` holds it: sorts as (shard, entry id milliseconds, sequence)."""
    ms, _, seq = entry_id.partition("-")
    return f"{shard:05d}:{int(ms):020d}-{int(seq or 0):020d}"


def entry_position(entry_id: str) -> str:
    """The entry-id part of a position, as a shard's watermark is given to the claim."""
    return position(0, entry_id)[6:]


_UNFINISHED = "order_key IS NOT NULL AND status IN ('pending', 'in_flight')"
"""The predicate of ``delivery_tasks_fifo``, written as there."""

# The lines with unfinished tasks, found by skipping through the index (one probe per line, however long
# the line), then the first task of each: the work is linear in lines, not in the tasks waiting in them.
_HEADS_CTES = f"""RECURSIVE lines AS (
    (SELECT destination_id, order_key FROM delivery_tasks WHERE {_UNFINISHED}
      ORDER BY destination_id, order_key LIMIT 1)
    UNION ALL
    SELECT n.destination_id, n.order_key
      FROM lines l, LATERAL (SELECT destination_id, order_key FROM delivery_tasks
                              WHERE {_UNFINISHED} AND (destination_id, order_key) > (l.destination_id, l.order_key)
                              ORDER BY destination_id, order_key LIMIT 1) n
), heads AS (
    SELECT h.* FROM lines l, LATERAL (
        SELECT id, destination_id, status, next_attempt_at, order_pos FROM delivery_tasks
         WHERE {_UNFINISHED} AND destination_id = l.destination_id AND order_key = l.order_key
         ORDER BY order_pos, event_received_at, event_id, id LIMIT 1) h
), """


def _beyond(watermarks: str) -> str:
    """Whether head ``h`` lies beyond its shard's watermark (``watermarks``: a text[] parameter, per shard the
    entry id up to which the stream is committed; null: no bound). ``order_pos`` is '<shard>:<entry id>'."""
    return f"coalesce(substr(h.order_pos, 7) > ({watermarks}::text[])[split_part(h.order_pos, ':', 1)::int + 1], false)"


def _released(blocked: str, watermarks: str) -> str:
    """Which heads may go: pending, due, not of a ``blocked`` destination, and not beyond the watermark."""
    return (
        f"h.status = 'pending' AND h.next_attempt_at <= now() AND h.destination_id <> ALL({blocked}::text[])"
        f" AND NOT {_beyond(watermarks)}"
    )


@functools.cache
def _claim_heads(window: int) -> str:
    """The released heads, ``window`` of them locked as candidates (a literal, as in ``tasks.window_for``)."""
    return claim_statement(
        f"""SELECT t.id, t.destination_id, d.account_id, t.next_attempt_at, {CIRCUIT} AS circuit
      FROM heads h JOIN delivery_tasks t ON t.id = h.id JOIN destinations d ON d.id = t.destination_id
     WHERE {_released("$2", "$11")} AND t.status = 'pending'
       AND {NOT_BLOCKED_ACCOUNT.format(param="$7")}
     ORDER BY t.next_attempt_at
     LIMIT {int(window)}
       FOR UPDATE OF t SKIP LOCKED""",
        f"""(SELECT extract(epoch FROM min(next_attempt_at) - now())::float8
              FROM heads WHERE status = 'pending' AND next_attempt_at > now()) AS next_due_in_s,
           (SELECT count(*) FROM heads h
             WHERE h.status = 'pending' AND h.next_attempt_at <= now() AND {_beyond("$11")}) AS held""",
        ctes=_HEADS_CTES,
    )


async def claim_heads(
    conn: Connection, ask: Claim, watermarks: Sequence[str | None]
) -> tuple[list[LeasedTask], int, float | None, int]:
    """Leases the released heads ``ask`` allows, as ``control.db.tasks.claim_ready`` leases unordered tasks (the
    same room, circuit and pause rules): (the tasks, how many candidates had a circuit that is not closed or
    a pause, seconds until the next head falls due, how many due heads wait for the stream watermark)."""
    rows = await conn.fetch(_claim_heads(window_for(ask.window)), *ask.params(), list(watermarks))  # $11
    meta = rows[0]
    claimed = leased(rows)
    return claimed, meta["circuit_candidates"], meta["next_due_in_s"], meta["held"]


async def head_candidates(
    conn: Connection,
    *,
    window: int,
    exclude_destinations: Sequence[str],
    watermarks: Sequence[str | None],
    exclude_accounts: Sequence[str] = (),
) -> list[asyncpg.Record]:
    """The released heads as ``control.db.tasks.due_candidates`` gives unordered tasks: locked until the
    caller's transaction ends, with their account, their destination's circuit, ``open_for_s`` and
    ``paused_for_s``."""
    return await conn.fetch(
        f"""WITH {_HEADS_CTES.removesuffix(", ")}
            SELECT t.id, t.destination_id, d.account_id, d.circuit, {CANDIDATE_GATE}
              FROM heads h JOIN delivery_tasks t ON t.id = h.id JOIN destinations d ON d.id = t.destination_id
             WHERE {_released("$1", "$2")} AND t.status = 'pending'
               AND {NOT_BLOCKED_ACCOUNT.format(param="$4")}
             ORDER BY t.next_attempt_at
             LIMIT $3
               FOR UPDATE OF t SKIP LOCKED""",
        list(exclude_destinations),
        list(watermarks),
        window,
        list(exclude_accounts),
    )
