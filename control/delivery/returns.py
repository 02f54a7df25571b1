"""Tasks claimed ahead and not sent, on their way back: handed back uncounted, or leased again.

A task held in ``Ready`` must start within its window ((lease - send) / 2 of its claim) so that its send ends
within its lease; one that did not is handed back uncounted (``control.db.tasks.hand_back``) and claimed
again later. Not so a task whose transform ran ahead and left it a request to send: its result is what took
the time (4 calls of 0.9 s claimed together come ~4.6 s after their claim, past the 1.5 s of the tests'
5 s lease), and handed back it lost that result, and every claim of it did the same again: never delivered
(issue 42). Such a task is leased again instead (``control.db.tasks.renew``: one statement for the lot, fenced
on its attempt like every write of a claimed task) and held as claimed when the renewal was sent, so its
send still ends within the lease renewed. One the renewal does not return is not this worker's any more (a
sweep took it: someone else sends it); its result is dropped and nothing is sent. A renewal that fails
(Postgres away) hands the tasks back; that failing too, their leases expire and a sweep hands them back: at
least once, as for any claimed task. Only the late path pays the round trip.

While on their way, the tasks' destinations are not claimed for (a claim would take the tasks due after them
first) and a sweep of this worker leaves the tasks renewing alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Coroutine, Iterator, Mapping, Sequence
from typing import Any

import asyncpg

from control.db import tasks as db_tasks
from control.db.context import Context
from control.db.faults import UNAVAILABLE, describe
from control.db.leased import LeasedTask
from control.delivery.ready import Ready
from control.delivery.transforms import Transforms

__all__ = ("Returns", "drain_sends")

log = logging.getLogger("hookyard.worker.deliver")


class Returns:
    """Hand-backs and renewals in progress; ``on_done`` runs after each (its tasks renewed are in ``ready``)."""

    def __init__(self, ctx: Context, ready: Ready, transforms: Transforms, on_done: Callable[[], None]) -> None:
        self.ctx = ctx
        self.ready = ready
        self.transforms = transforms
        self._on_done = on_done
        self._going: dict[asyncio.Task[None], Sequence[LeasedTask]] = {}

    def stale(self, tasks: list[LeasedTask]) -> None:
        """Tasks not started within their window: those with a transformed request waiting are leased again,
        the rest handed back."""
        sending: list[LeasedTask] = []
        back: list[LeasedTask] = []
        for task in tasks:
            (sending if self.transforms.sends_ahead(task) else back).append(task)
        if sending:
            self._go(self._renew(sending), sending)
        self.hand_back(back)

    def hand_back(self, tasks: list[LeasedTask]) -> None:
        """Tasks claimed ahead and never sent go back uncounted (failing: their lease); their results
        transformed ahead, if any, are dropped."""
        if not tasks:
            return
        self.transforms.forget([t.id for t in tasks])
        self._go(self._unlease(tasks), tasks)

    async def _unlease(self, tasks: Sequence[LeasedTask]) -> None:
        try:
            async with self.ctx.pool.acquire() as conn:
                await db_tasks.hand_back(conn, [(t.id, t.attempts, None) for t in tasks])
        except UNAVAILABLE as exc:
            n = len(tasks)
            log.warning("deliver: could not hand back %d unsent tasks (%s); their lease will", n, describe(exc))

    async def _renew(self, tasks: Sequence[LeasedTask]) -> None:
        renewed_at = time.monotonic()  # before the statement: the lease runs from later than this
        try:
            async with self.ctx.pool.acquire() as conn:
                renewed = await db_tasks.renew(
                    conn, [(t.id, t.attempts) for t in tasks], lease_s=self.ctx.settings.deliver_lease_s
                )
        except UNAVAILABLE as exc:  # renewed or not, handing back is right: fenced on the same attempt
            n = len(tasks)
            log.warning("deliver: could not renew the leases of %d late tasks (%s); back", n, describe(exc))
            self.transforms.forget([t.id for t in tasks])
            await self._unlease(tasks)
            return
        lost = [t.id for t in tasks if t.id not in renewed]
        if lost:
            log.warning("deliver: %d late transformed tasks were swept meanwhile; not sent here", len(lost))
            self.transforms.forget(lost)
        self.ready.add([t for t in tasks if t.id in renewed], renewed_at)

    def _go(self, work: Coroutine[Any, Any, None], tasks: Sequence[LeasedTask]) -> None:
        going = asyncio.create_task(work, name="deliver:return")
        self._going[going] = tasks
        going.add_done_callback(self._done)

    def _done(self, going: asyncio.Task[None]) -> None:
        self._going.pop(going, None)
        self._on_done()

    def destinations(self) -> set[str]:
        """The destinations of the tasks on their way: not claimed for meanwhile."""
        return {t.destination_id for tasks in self._going.values() for t in tasks}

    def task_ids(self) -> Iterator[str]:
        for tasks in self._going.values():
            for task in tasks:
                yield task.id

    async def wait(self) -> None:
        """Until every hand-back and renewal is done (``close``: the tasks renewed are in ``ready`` then)."""
        while self._going:
            await asyncio.wait(set(self._going))


async def drain_sends(
    ctx: Context, sends: Mapping[asyncio.Task[None], tuple[str, int]], unstarted: Collection[str]
) -> tuple[int, int]:
    """A stopping worker's sends in flight (send → (task id, attempts)) get ``deliver_drain_s`` to finish; the
    rest are cancelled and go back: uncounted those that sent nothing yet (their ids in ``unstarted``), released
    the others. Returns (how many were interrupted, how many of them went back uncounted)."""
    if not sends:
        return 0, 0
    log.info("deliver: draining %d in-flight sends", len(sends))
    _, late = await asyncio.wait(set(sends), timeout=ctx.settings.deliver_drain_s)
    if not late:
        return 0, 0
    interrupted = [sends[t] for t in late if t in sends]
    unsent = [(i, n) for i, n in interrupted if i in unstarted]
    for send_task in late:
        send_task.cancel()
    await asyncio.wait(late)
    try:
        async with ctx.pool.acquire() as conn:
            await db_tasks.hand_back(conn, [(i, n, None) for i, n in unsent])
            await db_tasks.release(conn, [t for t in interrupted if t not in unsent])
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        log.warning("deliver: could not hand back %d tasks (%s); their lease will", len(interrupted), exc)
    return len(interrupted), len(unsent)
