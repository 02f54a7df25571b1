"""Erasures: advances the erasure jobs (``POST /v1/endpoints/{id}/events/erase``), a page at a time.

A step takes the unfinished job advanced least recently of the account served least recently (accounts
take turns, whatever their number of jobs; SKIP LOCKED: several workers share the jobs, never one job) and
moves it one bounded step in one transaction (``control.workers.erasures.step``): a page of the
endpoint's events, the deferred events whose attempt finished, or the last stage. A worker killed mid-step
loses that step's transaction only; the next step of any worker resumes at the last committed page.

A job waiting for the flush to store what the edge acknowledged before the request, or whose deferred
events are all still in flight, moved nothing: the step tries the next job, and when
none moved, the loop waits ``idle_s``.
"""

from __future__ import annotations

from control.db.context import Context
from control.workers.erasures.step import PAGE, RETRY_S, advance

__all__ = ("Erasures",)


class Erasures:
    name = "erasures"

    def __init__(self, ctx: Context, *, page: int = PAGE, idle_s: float = 0.5, retry_s: float = RETRY_S) -> None:
        self.ctx = ctx
        self.page = page
        self.idle_s = idle_s
        self.retry_s = retry_s

    async def step(self) -> int:
        tried: list[str] = []
        while True:
            job_id, moved = await advance(self.ctx, page=self.page, exclude=tried, retry_s=self.retry_s)
            if job_id is None:
                return 0
            if moved:
                return moved
            tried.append(job_id)
