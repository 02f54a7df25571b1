"""A rule delivery's transform: the worker's cache of each destination's code (loaded once per version), its
run in the sandbox pool on the request an attempt would send, and what the attempt sends and records after it.

A claimed task carries its destination's ``transform_digest`` (the version), not the source; the worker
keeps the source per (destination, digest) and loads it only on a miss. A PATCH of the code is a new
digest, so the next attempt (a retry, a manual or bulk retry) runs the new version. The calls run in this
worker's sandbox processes (``control.transform.pool``), in the destination's account's share: V8 never
runs in the worker, and a transform that ends its process fails its own attempt alone.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from control.db import destinations as db_destinations
from control.db.context import Context
from control.db.leased import LeasedTask
from control.delivery.send import Outcome, forwardable, merge, signature
from control.records.destinations import HOP_BY_HOP
from control.records.storable import captured_headers
from control.records.transforms import TransformError, TransformRecord
from control.transform.apply import Outgoing, Result, apply, request_input, result_of
from control.transform.pool import MAX_BATCH, Pool, pool_for
from control.transform.wire import Input, Problem, Run
from shared.errors import NotATransformError

__all__ = ("CAPACITY", "Transforms", "captured", "outgoing", "recorded", "runs_ahead", "unsent")

CAPACITY = 256
"""Transform sources a worker keeps (64 KB at most each: 16 MB at most)."""


@dataclass(frozen=True, slots=True)
class _Loaded:
    source: str
    account: str


class Transforms:
    """``parked``: deliveries whose transform call waits or runs in the sandbox pool now. The deliver loop
    does not count them against its concurrency (``on_park`` tells it one more is parked): a hostile
    account's calls queued behind its share of the sandbox (issue 42) hold no send slot another account's
    deliveries need. The pool bounds how long they wait (``MAX_WAIT_S``); ``crowded`` names the destinations
    the loop stops claiming for meanwhile, so what an account has parked stays bounded too.

    Most transformed tasks are not parked at all: the deliver loop has a claim's tasks transformed ahead
    (``ahead``), a group per destination in one job of the pool, before they take a send slot; their
    attempts find the result waiting (``transformed_ahead``). Those count against ``crowded`` all the same."""

    def __init__(self, ctx: Context, on_park: Callable[[], None] | None = None, per_account: int = 32) -> None:
        self.ctx = ctx
        self.parked = 0
        self.in_pool = 0
        """Deliveries whose transform call waits or runs in the sandbox pool now: those parked, and those of
        claims transformed ahead (``ahead``)."""
        self.per_account = per_account
        """An account's parked deliveries past which its destinations are not claimed for."""
        self._on_park = on_park
        self._by_account: Counter[str] = Counter()
        self._by_destination: dict[str, str] = {}
        """The account of each destination with deliveries parked now."""
        self._loaded: OrderedDict[tuple[str, str], _Loaded] = OrderedDict()
        self._loading: dict[str, asyncio.Lock] = {}
        self._ahead: dict[str, Result] = {}
        """Results of tasks transformed ahead (``ahead``), by task id, until their attempt takes them."""
        self._slowed: OrderedDict[str, tuple[str, float]] = OrderedDict()
        """The code (digest) a destination's transform last ran here and the wait per call this worker last
        wrote on it (``_note_slowed``), for the last ``4 * CAPACITY`` destinations."""

    def _park(self, account: str, destination_id: str, count: int) -> None:
        self.in_pool += count
        self._by_account[account] += count
        self._by_destination[destination_id] = account

    def _unpark(self, account: str, count: int) -> None:
        self.in_pool -= count
        left = self._by_account[account] - count
        if left > 0:
            self._by_account[account] = left
        else:
            del self._by_account[account]
            self._by_destination = {d: a for d, a in self._by_destination.items() if a != account}

    def crowded(self) -> list[str]:
        """Destinations with deliveries parked whose account has ``per_account`` of them or more."""
        full = {account for account, n in self._by_account.items() if n >= self.per_account}
        return [d for d, account in self._by_destination.items() if account in full] if full else []

    async def _load(self, destination_id: str, digest: str) -> _Loaded | None:
        """The version's source and account; None when the destination no longer has a transform."""
        key = (destination_id, digest)
        found = self._loaded.get(key)
        if found is not None:
            self._loaded.move_to_end(key)
            return found
        lock = self._loading.setdefault(destination_id, asyncio.Lock())
        async with lock:  # concurrent deliveries of a new version load it once
            found = self._loaded.get(key)
            if found is None:
                async with self.ctx.pool.acquire() as conn:
                    row = await db_destinations.transform_source(conn, destination_id)
                if row is None or row["transform"] is None:
                    return None
                found = _Loaded(row["transform"], row["account_id"])
                for old in [k for k in self._loaded if k[0] == destination_id]:  # older versions: done with
                    del self._loaded[old]
                self._loaded[(destination_id, row["transform_digest"])] = found
                while len(self._loaded) > CAPACITY:
                    self._loaded.popitem(last=False)
        if len(self._loading) > 4 * CAPACITY:
            self._loading.clear()
        return found

    async def apply(self, task: LeasedTask, request: Outgoing) -> Result | None:
        """The destination's transform run on the request the task would send; None when it has none."""
        destination_id, digest = task.destination_id, task.transform_digest
        if digest is None:
            return None
        loaded = await self._load(destination_id, digest)
        if loaded is None:
            return None
        if task.transform_crashed_at is not None:  # not run again until its code changes or a retry asks
            return _not_run()
        pool = pool_for(self.ctx.settings)

        async def call(payload: Input) -> Run | Problem:
            account = loaded.account
            self.parked += 1
            self._park(account, destination_id, 1)
            if self._on_park is not None:
                self._on_park()
            try:
                return await pool.run(loaded.source, payload, account=account, key=_strike_key(destination_id, digest))
            finally:
                self.parked -= 1
                self._unpark(account, 1)

        try:
            result = await apply(call, request, _context(task))
        except NotATransformError as exc:  # it compiled when it was written: a V8 of another version?
            return _failed(exc)
        await self._note_slowed(pool, destination_id, digest)
        if result.crashed and result.record.error is not None:
            await self._mark_crash(task, result.record.error.message)
        return result

    async def ahead(self, tasks: Sequence[LeasedTask]) -> None:
        """Runs the transform of a claim's ``tasks`` of one destination and version (none marked crashed)
        before they take send slots, as one job of the pool (one future, one timer, one place in the account's
        queue; one batch of a sandbox process when they fit in one). Their attempts find the results
        (``transformed_ahead``); when the destination no longer has a transform there are none, and the
        attempts send as captured. Raises what loading the source raised (a store away): the attempts then run
        the transform themselves."""
        first = tasks[0]
        assert first.transform_digest is not None
        loaded = await self._load(first.destination_id, first.transform_digest)
        if loaded is None:
            return
        sents = [captured(task) for task in tasks]
        destination = {"id": first.destination_id, "name": first.destination_name}  # the same for every task here
        inputs: list[str | Input] = [
            request_input(sent, _context(t, destination)) for sent, t in zip(sents, tasks, strict=True)
        ]
        pool, account, count = pool_for(self.ctx.settings), loaded.account, len(tasks)
        key = _strike_key(first.destination_id, first.transform_digest)
        self._park(account, first.destination_id, count)
        try:
            if count <= MAX_BATCH:
                runs = await pool.run_many(loaded.source, inputs, account=account, key=key)
            else:
                parts = [inputs[at : at + MAX_BATCH] for at in range(0, count, MAX_BATCH)]
                done = await asyncio.gather(*(pool.run_many(loaded.source, p, account=account, key=key) for p in parts))
                runs = [run for part in done for run in part]
        finally:
            self._unpark(account, count)
        crash: str | None = None
        for task, sent, run in zip(tasks, sents, runs, strict=True):
            try:
                result = result_of(run, sent)
            except NotATransformError as exc:
                result = _failed(exc)
            if result.crashed and result.record.error is not None:
                crash = result.record.error.message
            self._ahead[task.id] = result
        await self._note_slowed(pool, first.destination_id, first.transform_digest)  # the results kept if it raises
        if crash is not None:
            await self._mark_crash(first, crash)

    def transformed_ahead(self, task_id: str) -> Result | None:
        """The result ``ahead`` left for a task (taken: an attempt's own), None when there is none."""
        return self._ahead.pop(task_id, None)

    def unsent_ahead(self, task: LeasedTask) -> bool:
        """Whether the result ``ahead`` left for the task sends nothing (a failed or skipped transform): its
        attempt records it without a send (``control.delivery.ready.Ready.add``)."""
        result = self._ahead.get(task.id)
        return result is not None and result.request is None

    def sends_ahead(self, task: LeasedTask) -> bool:
        """Whether ``ahead`` left the task a request to send: one started too late is leased again rather than
        handed back with it dropped (``control.delivery.returns``)."""
        result = self._ahead.get(task.id)
        return result is not None and result.request is not None

    def forget(self, task_ids: Sequence[str]) -> None:
        """Results left for tasks that go back unsent (handed back, or never started)."""
        for task_id in task_ids:
            self._ahead.pop(task_id, None)

    async def _mark_crash(self, task: LeasedTask, message: str) -> None:
        assert task.transform_digest is not None
        async with self.ctx.pool.acquire() as conn:
            await db_destinations.mark_transform_crash(conn, task.destination_id, task.transform_digest, message)

    async def _note_slowed(self, pool: Pool, destination_id: str, digest: str) -> None:
        """Writes on the destination how long the pool now waits before each call of its transform
        (``transform_slowed_s``) when that changed since this worker last wrote it, and again at each call
        that waited (rare: one per wait), since a PATCH clears the mark while the same code's wait may go on
        (its text unchanged); never per normal call. A destination first seen writes too (a clear, most often
        of nothing): a mark a worker that stopped since left would stay. Other code run on the destination
        since ends the old code's stops: a PATCH back to it starts afresh (it went on at 30 s, shown nowhere)."""
        key = _strike_key(destination_id, digest)
        wait_s = pool.wait_s(key)
        seen = self._slowed.get(destination_id)
        if seen is not None and seen[0] != digest:
            pool.forgive(_strike_key(destination_id, seen[0]))
        elif seen is not None and seen[1] == wait_s and not wait_s:
            self._slowed.move_to_end(destination_id)
            return
        async with self.ctx.pool.acquire() as conn:
            await db_destinations.mark_transform_slowed(conn, destination_id, digest, wait_s)
        self._slowed[destination_id] = (digest, wait_s)
        self._slowed.move_to_end(destination_id)
        while len(self._slowed) > 4 * CAPACITY:
            self._slowed.popitem(last=False)

    def close(self) -> None:
        self._loaded.clear()
        self._ahead.clear()
        self._slowed.clear()


def runs_ahead(task: LeasedTask) -> bool:
    """Whether a claimed task's transform runs ahead of its send (``Transforms.ahead``): it has one, not marked
    crashed, and something to send; a FIFO task keeps its call in its attempt, one of its line at a time."""
    return (
        task.transform_digest is not None
        and task.transform_crashed_at is None
        and not task.ordered
        and task.event_found
        and task.body_expired_at is None
    )


def _strike_key(destination_id: str, digest: str) -> str:
    """What the pool slows down when calls keep being stopped by a limit: the destination's transform as it
    is now, so corrected code (a PATCH of ``transform``) runs at once instead of inheriting the old code's
    wait."""
    return f"{destination_id}@{digest}"


def _not_run() -> Result:
    message = (
        "not run: this transform ended its sandbox process (see the destination's transform_crash); "
        "change its code, or retry the delivery to run it again"
    )
    return Result(None, TransformRecord(outcome="failed", error=TransformError(message=message, line=None)))


def _failed(exc: NotATransformError) -> Result:
    """It compiled when it was written: a V8 of another version?"""
    return Result(None, TransformRecord(outcome="failed", error=TransformError(message=exc.message, line=exc.line)))


def _context(task: LeasedTask, destination: dict[str, Any] | None = None) -> dict[str, Any]:
    """``event_context`` of a claimed task, made without its intermediate row: ``received_at`` goes as the
    datetime, which the sandbox process's JSON encoder writes as ``event_context`` does (RFC 3339, UTC as
    ``Z``), so the worker formats no date per delivery. ``destination``: its part, made once for a group of one
    destination's tasks (``ahead``): fewer containers made and held per call, fewer collections (ADR 0060)."""
    return {
        "event": {
            "id": task.event_id,
            "provider": task.provider,
            "event_type": task.event_type,
            "received_at": task.event_received_at,
            "labels": task.labels or [],
        },
        "destination": destination or {"id": task.destination_id, "name": task.destination_name},
    }


def captured(task: LeasedTask) -> Outgoing:
    """The request a claimed task sends before a transform: its captured request to the destination's URL and
    headers. For an event with no header kept as base64 (nearly all), ``forwardable`` and ``merge`` in one pass:
    without the two dicts made between them, 1.0 µs a delivery against 1.7 (ADR 0060, amended 2026-12-03 night)."""
    headers = task.headers or {}
    if task.headers_base64:
        out = merge(forwardable(captured_headers(headers, task.headers_base64)), task.destination_headers)
    else:
        named = {token.strip().lower() for token in headers["connection"].split(",")} if "connection" in headers else ()
        out = {name.lower(): value for name, value in headers.items() if name not in HOP_BY_HOP and name not in named}
        for name, value in (task.destination_headers or {}).items():
            out[name.lower()] = value
    return Outgoing(
        task.method or "POST",  # always there: an attempt of an event no longer stored sends nothing
        task.destination_url,
        out,
        bytes(task.body or b""),
    )


async def outgoing(
    transforms: Transforms, task: LeasedTask, secret: str | Sequence[str] | None
) -> tuple[Outgoing | None, Result | None]:
    """What a claimed task sends: its captured request to the destination's URL and headers, run through the
    destination's transform when it has one, then signed with ``secret`` (None: unsigned) over what the
    transform returned (several: each signs, a rotation's overlap). Also what the transform did (None without
    one). The request is None when the transform kept it from being sent (skipped or failed)."""
    transformed = transforms.transformed_ahead(task.id) if task.transform_digest is not None else None
    if transformed is None:  # not transformed ahead (``Transforms.ahead``, which made its own ``captured``)
        sent = captured(task)
        if task.transform_digest is not None:
            transformed = await transforms.apply(task, sent)
        request = sent if transformed is None else transformed.request
    else:
        request = transformed.request
    if request is not None:
        request.headers = merge(
            request.headers,
            signature(task.event_id, request.body, secret) if secret is not None else None,
            {"x-hookyard-event-id": task.event_id, "x-hookyard-delivery-attempt": str(task.attempts)},
        )
    return request, transformed


def recorded(transformed: Result | None) -> dict[str, Any] | None:
    """The ``deliveries.transform`` value: what the transform did, None without one."""
    return None if transformed is None else msgspec.to_builtins(transformed.record)


def unsent(record: TransformRecord, unrun: bool = False) -> tuple[Outcome, str, str | None]:
    """The outcome of an attempt the transform kept from being sent, the task's status and its error:
    skipped is done (succeeded); failed is failed for good, neither retried (the same input gives the same
    result: retry it after changing the code) nor counted against the destination's circuit. A call that never
    ran (``unrun``: its turn did not come in time) is not its code's doing: its outcome is not permanent, and
    the attempt is retried on the schedule (``control.delivery.attempt``). A replay's transform is judged the
    same way (``control.service.replay``)."""
    if record.outcome == "skipped":
        return Outcome(status=None, latency_ms=0, sent_headers={}), "succeeded", None
    error = record.error
    where = f" (line {error.line})" if error is not None and error.line is not None else ""
    text = f"transform failed: {error.message if error else 'unknown error'}{where}"
    return Outcome(status=None, latency_ms=0, sent_headers={}, error=text, permanent=not unrun), "failed", text
