"""Retries: advances the bulk retry jobs (``POST /v1/endpoints/{id}/deliveries/retry``), a page at a time.

A step takes the unfinished job advanced least recently (SKIP LOCKED: several workers share the jobs, never
one job) and, in one transaction:

- checks a chunk of its items (a rotating cursor over them): those whose task made its new attempt are
  counted done or failed and removed;
- while it is ``scanning``, re-queues its next page of failed deliveries (``control.db.retries.scan_page``);
  a page shorter than ``page`` was the last one, and the job is ``delivering``;
- a ``delivering`` job with nothing left waiting is ``completed``.

Each page commits with its cursor, so a job of any size is many small transactions, and a worker killed
mid-job costs nothing: the next step (of any worker) resumes at the last committed page. Sending is the
deliver worker's (woken by the page's NOTIFY), so the destinations' caps and circuits pace every job.

A step that moved nothing (the job's deliveries are still waiting for their attempts) tries the next job;
when none moved, the loop waits ``idle_s``.
"""

from __future__ import annotations

import logging

import asyncpg

from control.db import retries as db_retries
from control.db.connection import Connection
from control.db.context import Context
from control.service.retries import job_filters

__all__ = ("RetryJobs",)

log = logging.getLogger("hookyard.worker.retries")


class RetryJobs:
    name = "retries"

    def __init__(self, ctx: Context, *, page: int = 1000, check: int = 5000, idle_s: float = 0.5) -> None:
        self.ctx = ctx
        self.page = page
        """Failed deliveries looked at per step (one transaction re-queues the matching ones)."""
        self.check = check
        """Items checked for their outcome per step."""
        self.idle_s = idle_s

    async def step(self) -> int:
        tried: list[str] = []
        while True:
            async with self.ctx.pool.acquire() as conn, conn.transaction():
                job = await db_retries.take_job(conn, exclude=tried)
                if job is None:
                    return 0
                moved = await self._advance(conn, job)
            if moved:
                return moved
            tried.append(job["id"])

    async def _advance(self, conn: Connection, job: asyncpg.Record) -> int:
        """One bounded step of the job in the caller's transaction; returns how much it moved (0: nothing)."""
        checked = await db_retries.check_items(conn, job["id"], after=job["check_after"], limit=self.check)
        full_chunk = checked.checked >= self.check
        moved = checked.done + checked.failed + (1 if full_chunk else 0)  # a full chunk: more to check now
        state, scanned_to = job["state"], job["scanned_to"]
        matched = queued = 0
        if state == "scanning":
            page = await db_retries.scan_page(conn, job, job_filters(job), size=self.page)
            matched, queued = page.matched, page.queued
            scanned_to = page.last_id or scanned_to
            moved += page.visited
            if page.visited < self.page:
                state = "delivering"
                moved += 1
        waiting = job["queued"] + queued - job["done"] - checked.done - job["failed"] - checked.failed
        if state == "delivering" and waiting <= 0:
            state = "completed"
            moved += 1
        await db_retries.save_progress(
            conn,
            job["id"],
            state=state,
            scanned_to=scanned_to,
            check_after=(checked.last_task_id or "") if full_chunk else "",
            matched=matched,
            queued=queued,
            done=checked.done,
            failed=checked.failed,
        )
        if state == "completed":
            log.info(
                "retries: job %s completed: %d matched, %d queued, %d done, %d failed",
                job["id"],
                job["matched"] + matched,
                job["queued"] + queued,
                job["done"] + checked.done,
                job["failed"] + checked.failed,
            )
        return moved
