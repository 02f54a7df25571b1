"""Batch consumers and housekeeping loops, run by ``hookyard worker [NAME ...]`` (``control.workers.main``).

Only the loops' names live here: ``hookyard up`` needs them to split its worker and learner processes, and
importing a package runs its ``__init__``, so anything heavier here (the loops, asyncpg's pool, the delivery
package: ~200 modules, 0.2-0.3 s of CPU) would be paid by every ``up`` for a tuple of strings (issue 44)."""

from __future__ import annotations

__all__ = ("LOOP_NAMES",)

LOOP_NAMES = ("flush", "learn", "deliver", "sweep", "retries", "alerts", "erasures")
"""Every loop ``hookyard worker`` can run, in the order it builds them when none is named; the factories of
``control.workers.main`` are keyed by exactly these (checked when it is imported)."""
