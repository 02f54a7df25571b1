"""Retention of what the sweep does not drop a partition at a time: event bodies, delivery records and tasks,
dead letters, alerts, stats counters.

Body retention: an endpoint's ``body_retention_days`` removes bodies before the instance drops events.

The sweep calls :func:`expire_bodies` once a round. For each endpoint whose bodies expire before its events
do, it expires batches (``control.db.retention.expire_batch``: one short transaction each) from the
endpoint's watermark up to the cutoff, within a time budget per round, so a first round on a large
database (a retention just lowered, or set on a busy endpoint) spreads over rounds instead of holding the
sweep's other duties; the watermark makes the next round start where this one stopped.

An event whose flush was delayed past the watermark (received before it, stored after it moved) keeps
its body until the instance's retention: the cutoff is at least a day old, so that needs a flush a day late.

Delivery records and finished delivery tasks (:func:`expire_records`) go at the instance's retention, as
their events do: by id range (ids are ULIDs, time first), in short batches within a time budget per round;
a round that runs out of time starts over from the oldest id next round, where what it removed is gone
(docs/adr/0048-records-and-tasks-expire-by-id-range.md).

Dead letters (:func:`prune_dead_letters`) hold whole captured requests, bodies included, in Redis: one is
removed once its request is older than its endpoint's body retention (the instance's retention when the
endpoint has none, is gone, or the entry could not be decoded), so a body never outlives its lifetime
there. Alerts (:func:`prune_alerts`) are removed, with their sends and attempts, once resolved longer ago
than the instance's retention.
"""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import msgspec

from control.db import alerts as db_alerts
from control.db import retention as db_retention
from control.db import stats as db_stats
from control.db.context import Context
from control.records.destinations import MAX_DEDUPLICATE_WINDOW_S
from control.service.stats import KEEP as STATS_KEPT
from control.support import dead_letters
from shared import ids
from shared.wire import decode_records

__all__ = (
    "BATCH",
    "Expired",
    "Gone",
    "expire_bodies",
    "expire_records",
    "prune_alerts",
    "prune_dead_letters",
    "prune_stats",
)

_DAY_MS = 86_400_000
_PAGE = 1000
"""Dead letters read per XRANGE."""

BATCH = 1000
"""Events per batch (and transaction): measured on the bench database, see docs/reference/retention.md."""


class Expired(NamedTuple):
    events: int
    deliveries: int
    finished: bool
    """False when the budget ran out with events still due (the next round goes on)."""


async def expire_bodies(ctx: Context, *, batch: int = BATCH, budget_s: float = 10.0) -> Expired:
    deadline = time.monotonic() + budget_s
    events = deliveries = 0
    async with ctx.pool.acquire() as conn:
        due = await db_retention.due_endpoints(conn, retention_days=ctx.settings.retention_days)
    for endpoint in due:
        since = endpoint["watermark"]
        while True:
            if time.monotonic() >= deadline:
                return Expired(events, deliveries, finished=False)
            async with ctx.pool.acquire() as conn:
                done = await db_retention.expire_batch(
                    conn, endpoint["id"], since=since, cutoff=endpoint["cutoff"], limit=batch
                )
            events += done.events
            deliveries += done.deliveries
            if done.events < batch:
                break
            since = done.last
    return Expired(events, deliveries, finished=True)


class Gone(NamedTuple):
    records: int
    tasks: int
    finished: bool
    """False when the budget ran out with rows still to look at (the next round goes on)."""


async def expire_records(ctx: Context, *, batch: int = BATCH, budget_s: float = 10.0) -> Gone:
    """Removes the delivery records, and the finished delivery tasks, created longer ago than the instance's
    retention: what an event leaves behind once its partition is dropped. A finished task stays at least the
    longest deduplication window (7 days) after it finished, whatever the retention: a task holds no payload,
    and a copy arriving within the window must find it to be skipped."""
    deadline = time.monotonic() + budget_s
    now = datetime.now(UTC)
    cutoff = now - timedelta(days=ctx.settings.retention_days)
    # A finished task is what tells a later copy of its webhook that it was delivered (deduplication): it stays
    # for the longest window even where the retention is shorter, or the copy would be sent after all.
    deduplicated = now - timedelta(seconds=MAX_DEDUPLICATE_WINDOW_S)
    tasks = functools.partial(db_retention.remove_tasks, finished_before=deduplicated)
    removed = {}
    for prefix, remove, until in (
        ("dlv", db_retention.remove_records, cutoff),
        ("task", tasks, min(cutoff, deduplicated)),
    ):
        cutoff_ms = int(until.timestamp() * 1000)
        below = ids.new_id(prefix, cutoff_ms)[: len(prefix) + 11]  # the time part only: below every id of then
        after, removed[prefix] = "", 0
        while True:
            if time.monotonic() >= deadline:
                return Gone(removed["dlv"], removed.get("task", 0), finished=False)
            async with ctx.pool.acquire() as conn:
                done = await remove(conn, after=after, below=below, cutoff=until, limit=batch)
            removed[prefix] += done.removed
            if done.scanned < batch or done.last is None:
                break
            after = done.last
    return Gone(removed["dlv"], removed["task"], finished=True)


async def prune_alerts(ctx: Context, *, batch: int = BATCH) -> int:
    """Removes the alerts resolved longer ago than the instance's retention, in batches; how many."""
    cutoff = datetime.now(UTC) - timedelta(days=ctx.settings.retention_days)
    bound = ids.new_id("alert", int(cutoff.timestamp() * 1000))[: len("alert_") + 10]  # the time part only
    removed = 0
    while True:
        async with ctx.pool.acquire() as conn:
            n = await db_alerts.prune(conn, fired_before_id=bound, resolved_before=cutoff, limit=batch)
        removed += n
        if n < batch:
            return removed


def _received_ms(entry_id: str, raw: bytes | None) -> tuple[int, str | None]:
    """(when the request was received, its endpoint), from the record; the dead letter's own time and no
    endpoint for an entry that does not decode."""
    try:
        (record,) = decode_records(raw or b"")
    except (msgspec.MsgspecError, ValueError):
        return int(entry_id.split("-", 1)[0]), None
    return record.received_at_us // 1000, record.endpoint_id


async def prune_dead_letters(ctx: Context) -> int:
    """Removes the dead letters whose request is past its body retention; how many. Reads every dead letter,
    a page at a time: they are few (each is an alert), and one re-driven and refused again is a new entry
    for an old request, so the entry's own time cannot bound the read."""
    now_ms = int(time.time() * 1000)
    instance_ms = ctx.settings.retention_days * _DAY_MS
    removed = 0
    for shard in range(ctx.keys.shards):
        stream = ctx.keys.dead_letter_stream(shard)
        start = "-"
        while entries := await dead_letters.entries(ctx.redis, ctx.keys, shard, after=start, count=_PAGE):
            letters = [(eid, *_received_ms(eid, fields.get(b"r"))) for eid, fields in entries]
            async with ctx.pool.acquire() as conn:
                days = await db_retention.body_retention(conn, sorted({e for _, _, e in letters if e}))
            due = []
            for eid, received_ms, endpoint_id in letters:
                body_days = days.get(endpoint_id) if endpoint_id else None
                kept_ms = instance_ms if body_days is None else min(instance_ms, body_days * _DAY_MS)
                if received_ms < now_ms - kept_ms:
                    due.append(eid)
            if due:
                removed += await ctx.redis.xdel(stream, *due)
            if len(entries) < _PAGE:
                break
            start = "(" + letters[-1][0]
    return removed


async def prune_stats(ctx: Context) -> int:
    """Removes the stats counters no window reads any more (the sweep calls it every round); how many rows
    went."""
    async with ctx.pool.acquire() as conn:
        return await db_stats.prune(conn, keep=STATS_KEPT)
