"""The cyclic garbage collector held off while one announcement's waiters are answered.

A thousand long polls parked on one process hold their requests' objects (scopes, coroutines, futures,
timers): the collector's young generations fill with them while they park, and a collection that falls
inside a wake scans them all while every answer waits behind it (1-23 ms, once 95 ms, per wake in the
profiles of ADR 0057's amendment and ADR 0068). Held off for the wake, the collection runs once the
waiters have left and their objects are freed by reference counting: less to scan, and after the answers,
not before them. Bounded in time (``LONGEST_S``), so no wake holds the collector off for long whatever
its waiters do; a collector disabled by someone else is left alone.
"""

from __future__ import annotations

import asyncio
import gc

__all__ = ("WakeCollection",)

LONGEST_S = 1.0
"""The longest the collector stays off for one wake (a wake of 1,000 answers takes 50-250 ms here)."""


class WakeCollection:
    """``hold`` when an announcement wakes many waiters; ``release`` once they left (or ``LONGEST_S`` passed)."""

    __slots__ = ("_timer",)

    def __init__(self) -> None:
        self._timer: asyncio.TimerHandle | None = None

    @property
    def holding(self) -> bool:
        return self._timer is not None

    def hold(self) -> None:
        if self._timer is not None:  # already held: the bound counts from the first wake
            return
        if not gc.isenabled():
            return
        gc.disable()
        self._timer = asyncio.get_running_loop().call_later(LONGEST_S, self.release)

    def release(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            gc.enable()
