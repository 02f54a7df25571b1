"""Claimed ahead: leased tasks waiting for a free slot of their destination, so that a finished send starts
the next one at once instead of after a claim's round trip to Postgres.

Why: a destination takes at most ``deliver_per_destination`` requests in flight per worker. A worker that
claims only the room it has stalls for a whole claim every half cap of sends: against a sink that answers in
well under a millisecond, 16 sends per claim round trip (several ms on a busy machine) was the throughput of
a worker (``bench delivery``: 3,543/s, with the worker's CPU a quarter busy). Tasks claimed ahead overlap the
next claim with the sends.

How many: per destination, as many as it finished in the last ``WINDOW_S`` (at most ``DEPTH`` times the
cap). A fast destination gets a deep queue, a slow or new one none (exactly as before), and nothing waits
here much longer than ``WINDOW_S``. The tasks here are leased like those in flight, so a worker killed with
tasks here loses none (the lease expiry hands them back, as for a send in flight); one that is not sent in
time (its lease might not outlast its send) or whose destination started failing (its circuit decides
again, at the next claim) is handed back uncounted (``control.db.tasks.hand_back``), never sent late. One
whose transform, run ahead, left it nothing to send is timed from when that result came (``add``); one it left
a request to send is leased again and held anew (``control.delivery.returns``).

What it costs: the deliver loop asks for the sum of every destination's allowance after each send
(:meth:`Ready.allowance`). That sum is kept as it changes, not summed again: with thousands of destinations
each finishing a send now and then (``bench pipeline`` with 10,000 endpoints), the sum over every paced
destination per send was 40 % of the worker's CPU, and the pace of a destination that stopped was only
forgotten at the next sweep, seconds later (docs/adr/0064-delivery-cost-against-ingest.md).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from control.db.leased import LeasedTask

__all__ = ("DEPTH", "EXACT_UP_TO", "WINDOW_S", "Ready")

WINDOW_S = 0.1
"""A destination's recent pace: the sends it finished in this long is how many of its tasks are held ahead."""
DEPTH = 10
"""At most this many caps' worth of a destination's tasks held ahead. Three was not enough at a few thousand
sends a second: the next claim, waiting for Postgres' CPU behind a large results write, often took longer
than three caps took to drain, and the worker sat with nothing in flight (ADR 0034, amendment of
2026-11-29)."""

EXACT_UP_TO = 64
"""Up to this many paced destinations, :meth:`Ready.allowance` looks at each of them on every call."""


class Ready:
    """Leased tasks not yet started, per destination, oldest first; and each destination's recent pace."""

    def __init__(self, *, per_destination: int, lease_s: float, send_s: float) -> None:
        self._cap = DEPTH * per_destination
        self._start_within_s = (lease_s - send_s) / 2
        """A task claimed longer ago than this might not finish its send within its lease: handed back. Half
        the slack between the two, as the lease runs from the claim's statement (after ``claimed_at``) on
        Postgres's clock and the send's bound on ours."""
        self._queues: dict[str, deque[tuple[float, LeasedTask]]] = {}
        self._pace: dict[str, list[float]] = {}  # destination → [window start, finished in it, in the one before]
        self._allowed: dict[str, int] = {}  # destination → its ``ahead`` when last looked at, summed in ``_total``
        self._total = 0
        self._looked_at = float("-inf")  # when every pace was last rolled (``allowance``)
        self.count = 0

    # -- pace ---------------------------------------------------------------------------------------------
    def finished(self, destination_id: str, now: float) -> None:
        """One send to the destination finished (whatever its outcome: a failure hands its queue back)."""
        pace = self._pace.get(destination_id)
        if pace is None:
            pace = self._pace[destination_id] = [now, 0.0, 0.0]
        self._roll(pace, now)
        pace[1] += 1
        self._note(destination_id, pace)

    def ahead(self, destination_id: str, now: float) -> int:
        """How many of the destination's tasks may be held beyond its cap."""
        pace = self._pace.get(destination_id)
        if pace is None:
            return 0
        self._roll(pace, now)
        return self._note(destination_id, pace)

    def allowance(self, now: float) -> int:
        """The sum of :meth:`ahead` over every destination. With up to ``EXACT_UP_TO`` paced destinations,
        every pace is rolled on each call, as each ``ahead`` was before. With more, without looking at each:
        a share is updated when its destination finishes a send or is looked at, and every pace is rolled
        (those gone idle forgotten) at most every ``WINDOW_S / 4``, so a share lags the clock by that much at
        most (the window's roll is late by as much: a little more is claimed ahead, never sent late)."""
        if len(self._pace) <= EXACT_UP_TO or now - self._looked_at >= WINDOW_S / 4:
            self._looked_at = now
            self.forget_idle(now)
            for destination_id, pace in self._pace.items():
                self._roll(pace, now)
                self._note(destination_id, pace)
        return self._total

    def _note(self, destination_id: str, pace: list[float]) -> int:
        allowed = min(self._cap, int(max(pace[1], pace[2])))
        self._total += allowed - self._allowed.get(destination_id, 0)
        self._allowed[destination_id] = allowed
        return allowed

    def _roll(self, pace: list[float], now: float) -> None:
        if now - pace[0] >= WINDOW_S:
            pace[2] = pace[1] if now - pace[0] < 2 * WINDOW_S else 0.0
            pace[0], pace[1] = now, 0.0

    def tracked(self, in_flight: Iterable[str]) -> set[str]:
        """The destinations the caps look at: those with a send ``in_flight``, a task held here, or a recent pace.
        Those with only a pace matter too: a destination's sends often finish together (one batch, one answer
        time), and the claim that follows, with none of its sends in flight, must still take its pace's worth
        ahead. Counting only destinations in flight, a destination answering in lockstep was never claimed
        ahead."""
        return {*in_flight, *self._queues, *self._pace}

    def forget_idle(self, now: float) -> None:
        """Drops the pace of destinations that finished nothing for two windows and hold nothing."""
        for destination_id in [d for d, p in self._pace.items() if now - p[0] >= 2 * WINDOW_S]:
            if destination_id not in self._queues:
                del self._pace[destination_id]
                self._total -= self._allowed.pop(destination_id, 0)  # nothing finished for two windows: 0 anyway

    # -- queue --------------------------------------------------------------------------------------------
    def add(
        self, tasks: Iterable[LeasedTask], claimed_at: float, unsent: Callable[[LeasedTask], bool] | None = None
    ) -> None:
        """Holds ``tasks`` claimed at ``claimed_at``; those ``unsent`` says will send nothing (their transform,
        run ahead, failed or skipped them: their attempt only records that) as if claimed now. The window to
        start in keeps a send within the lease; without a send, what is left of it is enough to record. A
        runaway transform's tasks claimed together took longer than the window and were handed back, their
        results dropped, and each claim of them did the same again, for ever (issue 42)."""
        now = time.monotonic() if unsent is not None else claimed_at
        for task in tasks:
            at = now if unsent is not None and unsent(task) else claimed_at
            self._queues.setdefault(task.destination_id, deque()).append((at, task))
            self.count += 1

    def held(self, destination_id: str) -> int:
        queue = self._queues.get(destination_id)
        return 0 if queue is None else len(queue)

    def destinations(self) -> list[str]:
        return list(self._queues)

    def pop(self, destination_id: str, now: float, stale: list[LeasedTask]) -> LeasedTask | None:
        """The destination's oldest task that can still be sent within its lease; older ones go to ``stale``."""
        queue = self._queues.get(destination_id)
        while queue:
            claimed_at, task = queue.popleft()
            self.count -= 1
            if not queue:
                del self._queues[destination_id]
            if now - claimed_at <= self._start_within_s:
                return task
            stale.append(task)
        return None

    def take_all(self, destination_id: str | None = None) -> list[LeasedTask]:
        """The destination's tasks (every destination's when None), removed."""
        keys = list(self._queues) if destination_id is None else [destination_id]
        out = [task for key in keys for _, task in self._queues.pop(key, ())]
        self.count -= len(out)
        return out

    def task_ids(self) -> Iterator[str]:
        for queue in self._queues.values():
            for _, task in queue:
                yield task.id
