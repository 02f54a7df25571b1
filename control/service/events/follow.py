"""The long poll with a position (``events/wait?after=``): what ``hookyard listen`` and ``tail`` follow.

A plain wait answers the first match that arrives while it waits, so a caller that goes away (a dropped
connection, a restarted control plane, its own restart) misses what was stored meanwhile. With ``after``,
every answer carries ``cursor``, a position in the endpoint's events in the order they were stored; passing
it back answers the next match after it, however long ago it was stored. ``after=now`` starts from the
present. A timeout (204) carries the cursor too (header ``hookyard-cursor``): it moves past events the
filters skipped, so they are not read again.

Why not ``received_at``: batches of the flush commit in any order (several lanes, several workers), so an
event can become visible after a later-received one was already answered. The position is the storing
transaction's id (``events.stored_xid``, migration 0013) and the event id; a match is answered only once
its transaction is below the horizon, that is once every transaction that could still add an event before it
has finished (``control.db.events.first_stored_after``). The horizon is the smallest transaction still in
progress in the read's snapshot that could store an event, or the snapshot's xmax when there is none
(``control.db.follow_horizon``, ADR 0081, 0087): not the snapshot's xmin, which is cluster-wide, so a long
writing transaction in another database of the same server, or of another client of this one (another app's
migration, a psql session left open), would hold every follower until it ended. A transaction counts as unable
to store an event only when the server's activity view positively says it is another database's or not one
of hookyard's connections; anything else still holds the horizon, so a follower may wait one look
longer but never moves past an event its snapshot could not see yet. A match not yet safe is looked at
again shortly (usually the next commit, milliseconds away); new commits on the endpoint wake the waiter
through the same pub/sub as the plain wait. A server that is stopping answers as a timeout does, after one
look, so the caller resumes from the cursor on the next server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from control.db import events as db_events
from control.db.context import Context, Principal
from control.db.events import EventFilters
from control.records.events import Event
from control.service.endpoints import require_endpoint
from control.service.events.read import check_wait_timeout, event_record
from control.support.long_poll import ENDPOINT_GONE, Wakeups
from control.support.page_cursors import decode_position, encode_position

__all__ = ("NOW", "Followed", "follow_events")

NOW = "now"
_READY_WAIT_S = 2.0
_SAFETY_S = 5.0
"""Longest pause between looks with nothing pending: a net under the pub/sub wakeups, not the mechanism."""
_UNSAFE_FIRST_S, _UNSAFE_MAX_S = 0.01, 0.25


@dataclass(frozen=True, slots=True)
class Followed:
    event: Event | None
    """The first match stored after the position; None when ``timeout`` passed without one."""
    cursor: str
    """The position to pass as ``after`` next: just after ``event``, or as far as this call looked."""


async def follow_events(
    ctx: Context,
    wakeups: Wakeups,
    principal: Principal,
    endpoint_id: str,
    filters: EventFilters,
    *,
    after: str,
    timeout_s: float,
) -> Followed:
    """The first match stored after ``after`` (``now``, or a cursor of a previous answer), or None with
    the cursor to continue from once ``timeout_s`` passes. A cursor of ``test-webhook`` is inclusive: its
    first answer is the sample that call sent."""
    check_wait_timeout(timeout_s)
    position = None if after == NOW else decode_position(after)  # (xid, event id, inclusive)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
    with wakeups.watch(ctx.keys.event_channel(endpoint_id)) as waiter:
        await waiter.ready(min(_READY_WAIT_S, deadline - loop.time()))
        unsafe_pause = _UNSAFE_FIRST_S
        while True:
            _, news = waiter.take()  # before looking: news arriving during the look signals another one
            async with ctx.pool.acquire() as conn:
                if ENDPOINT_GONE in news:  # deleted while following: its 404 now, not a 204 at the deadline
                    await require_endpoint(conn, principal, endpoint_id)
                if position is None:
                    position = (await db_events.now_position(conn), "", False)
                horizon, row = await db_events.first_stored_after(
                    conn, endpoint_id, filters, xid=position[0], event_id=position[1], inclusive=position[2]
                )
            if row is not None and row["position_xid"] < horizon:
                return Followed(event_record(row), encode_position(row["position_xid"], row["id"]))
            if row is not None:  # stored, but an older transaction may still add an event before it
                pause = unsafe_pause
                unsafe_pause = min(unsafe_pause * 2, _UNSAFE_MAX_S)
            else:
                if horizon > position[0]:  # nothing matched below the horizon: move past it
                    position = (horizon, "", False)
                pause = _SAFETY_S
            remaining = deadline - loop.time()
            if remaining <= 0 or waiter.stopped:  # time is up, or the server is stopping: answer with the cursor
                return Followed(None, encode_position(position[0], position[1], inclusive=position[2]))
            await waiter.wait(min(pause, remaining))
