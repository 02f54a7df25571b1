"""Learn: the schemas of stored events, learned off the flush's critical path (ADR 0041).

The flush notes each batch's new events (``control.db.learn_queue``: one row per batch, written by the
statement that stores them, so only committed events are ever noted and a re-processed entry is never noted
twice). A step of this loop takes the oldest notes no other learner holds (``FOR UPDATE SKIP LOCKED``),
reads their events from Postgres, learns them (``control.schemas.learn``) and deletes the notes, all in one
transaction. So every stored event is learned exactly once:

- a note is deleted only in the transaction that writes what was learned from it: a worker killed (or a
  connection lost) mid-step rolls both back, and the note is taken again, by this worker or any other;
- two learners never hold one note, and the schema rows they both touch are locked in id order
  (``control.db.schemas.lock``), so they wait for each other instead of merging a state twice or
  deadlocking.

The events are read ``FOR KEY SHARE`` (``control.db.learn_queue.events``): an erasure deleting one of them
waits for the step's commit, so its later scrub of the schemas removes what the step learned; without the
lock a step that read the event before the deletion could merge its value back after the scrub (ADR 0038).

Why a worker of its own, reading the events back from Postgres rather than carrying bodies in Redis: the
note is the only thing written atomically with the events, and the flush's batch is the unit a stream
entry may be re-processed in; learning from a second copy of the bodies would need a marker per event to
stay exactly-once. The read is an index probe per event in the batch's partitions, made by the learner
(whose CPU is not the flush's). Several notes per step make one merge per schema for all of them, which
is cheaper than one per flush batch.

Priority: a process that runs the learn loop alone (``hookyard worker learn``, which ``hookyard up`` starts
next to the other loops) lowers its CPU priority by ``NICE``: learning is background work, and on a busy
host the flush and Postgres come first; the notes wait meanwhile and are learned when there is CPU to spare.

Latency: a note waits at most ``idle_s`` after an idle step, and behind the notes before it under load
(``control.db.learn_queue.backlog`` says how far behind; ``bench flush`` reports it).
"""

from __future__ import annotations

import logging
import os

from control.db import learn_queue as queue
from control.db.context import Context
from control.schemas.learn import Learner

__all__ = ("Learn",)

log = logging.getLogger("hookyard.worker.learn")

NICE = 10
"""How much a process running only the learn loop lowers its CPU priority (``os.nice``)."""


def lower_priority() -> None:
    """``NICE`` for this process; where the platform refuses, learning runs at the usual priority."""
    try:
        os.nice(NICE)
    except OSError as exc:
        log.info("learn: could not lower the CPU priority (%s); learning at the usual one", exc)


class Learn:
    name = "learn"

    def __init__(self, ctx: Context, *, learner: Learner | None = None, notes: int = 4, idle_s: float = 0.2) -> None:
        self.ctx = ctx
        self.learner = learner or Learner()
        """One per process: its shape, Struct and state caches are what make learning cheap."""
        self.notes = notes
        """Notes (flush batches) per step: more make fewer merges, and a longer step."""
        self.idle_s = idle_s

    async def step(self) -> int:
        async with self.ctx.pool.acquire() as conn, conn.transaction():
            notes = await queue.take(conn, self.notes)
            if not notes:
                return 0
            rows = await queue.events(conn, notes)
            if rows:
                await self.learner.learn(conn, rows)
            await queue.forget(conn, [n.id for n in notes])
        return sum(len(n.event_ids) for n in notes)
