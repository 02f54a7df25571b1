"""Waiting until an event the edge accepted is stored, and the position to follow it from.

Why: the edge answers a request as soon as the event is in its Redis stream, and the flush worker stores it
milliseconds later. A caller that sends a sample and then asks for it (``get_event``) or waits for it
(``wait_for_event``, ``events/wait``) raced the flush: the read found nothing, and a plain wait, which
answers only events arriving while it waits, waited its whole timeout for an event stored before it began.
So ``test-webhook`` answers once the event is stored, with a ``cursor`` that ``events/wait?after=`` accepts
and whose first answer is that very event: the documented flow (send, then wait) returns the sample
whatever the timing.

The wait is the long poll's own machinery: the endpoint's channel is watched *before* the request goes to
the edge, so the flush's announcement cannot be missed, and each announcement (or a resubscription, or a
pause of at most ``_SAFETY_S`` as a net under pub/sub) looks the event up by id.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from control.db import events as db_events
from control.db.context import Context
from control.support.long_poll import Waiter, Wakeups
from control.support.page_cursors import encode_position

__all__ = ("STORE_WAIT_S", "Storing", "watch_storing")

STORE_WAIT_S = 10.0
"""How long a sent sample may take to be stored before the answer goes without it (the flush is behind, or
no worker runs); its ``cursor`` is still one the sample will be followed from."""
_SAFETY_S = 1.0


@dataclass(slots=True)
class Storing:
    """One endpoint watched from before a request reaches its edge until the event it made is stored."""

    ctx: Context
    endpoint_id: str
    waiter: Waiter[object]
    before: int
    """The position "now" read before the request was sent: every event stored later is after it."""

    async def position(self, event_id: str, timeout_s: float = STORE_WAIT_S) -> tuple[bool, str]:
        """(stored, cursor): once ``event_id`` is stored, True and the position just before it (following
        from it answers the event first); after ``timeout_s`` without, False and the position read before
        the request was sent, which the event, once stored, still follows."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            self.waiter.take()  # before looking: an announcement during the look wakes the next one
            async with self.ctx.pool.acquire() as conn:
                xid = await db_events.stored_xid(conn, self.endpoint_id, event_id)
            if xid is not None:
                return True, encode_position(xid, event_id, inclusive=True)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False, encode_position(self.before, "")
            await self.waiter.wait(min(_SAFETY_S, remaining))


@contextlib.asynccontextmanager
async def watch_storing(ctx: Context, wakeups: Wakeups, endpoint_id: str) -> AsyncIterator[Storing]:
    """Watches the endpoint's announcements and reads the horizon; send the request inside the block."""
    with wakeups.watch(ctx.keys.event_channel(endpoint_id)) as waiter:
        async with ctx.pool.acquire() as conn:
            before = await db_events.now_position(conn)
        yield Storing(ctx, endpoint_id, waiter, before)
