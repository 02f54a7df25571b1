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
from control.records.storable import captured_headers
from control.records.transforms import TransformError, TransformRecord
from control.transform.apply import Outgoing, Result, apply, event_context
from control.transform.pool import pool_for
from control.transform.wire import Input, Problem, Run
from shared.errors import NotATransformError

__all__ = ("CAPACITY", "Transforms", "outgoing", "recorded", "unsent")

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
    the loop stops claiming for meanwhile, so what an account has parked stays bounded too."""

    def __init__(self, ctx: Context, on_park: Callable[[], None] | None = None, per_account: int = 32) -> None:
        self.ctx = ctx
        self.parked = 0
        self.per_account = per_account
        """An account's parked deliveries past which its destinations are not claimed for."""
        self._on_park = on_park
        self._by_account: Counter[str] = Counter()
        self._by_destination: dict[str, str] = {}
        """The account of each destination with deliveries parked now."""
        self._loaded: OrderedDict[tuple[str, str], _Loaded] = OrderedDict()
        self._loading: dict[str, asyncio.Lock] = {}

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
            message = (
                "not run: this transform ended its sandbox process (see the destination's transform_crash); "
                "change its code, or retry the delivery to run it again"
            )
            return Result(None, TransformRecord(outcome="failed", error=TransformError(message=message, line=None)))
        event = {
            "id": task.event_id,
            "provider": task.provider,
            "event_type": task.event_type,
            "received_at": task.event_received_at,
            "labels": task.labels,
        }
        destination = {"id": destination_id, "name": task.destination_name}
        pool = pool_for(self.ctx.settings)

        async def call(payload: Input) -> Run | Problem:
            account = loaded.account
            self.parked += 1
            self._by_account[account] += 1
            self._by_destination[destination_id] = account
            if self._on_park is not None:
                self._on_park()
            try:
                return await pool.run(loaded.source, payload, account=account, key=destination_id)
            finally:
                self.parked -= 1
                self._by_account[account] -= 1
                if not self._by_account[account]:
                    del self._by_account[account]
                    self._by_destination = {d: a for d, a in self._by_destination.items() if a != account}

        try:
            result = await apply(call, request, event_context(event, destination))
        except NotATransformError as exc:  # it compiled when it was written: a V8 of another version?
            error = TransformError(message=exc.message, line=exc.line)
            return Result(None, TransformRecord(outcome="failed", error=error))
        if result.crashed and result.record.error is not None:
            async with self.ctx.pool.acquire() as conn:
                await db_destinations.mark_transform_crash(conn, destination_id, digest, result.record.error.message)
        return result

    def close(self) -> None:
        self._loaded.clear()


async def outgoing(
    transforms: Transforms, task: LeasedTask, secret: str | Sequence[str] | None
) -> tuple[Outgoing | None, Result | None]:
    """What a claimed task sends: its captured request to the destination's URL and headers, run through the
    destination's transform when it has one, then signed with ``secret`` (None: unsigned) over what the
    transform returned (several: each signs, a rotation's overlap). Also what the transform did (None without
    one). The request is None when the transform kept it from being sent (skipped or failed)."""
    captured = Outgoing(
        task.method or "POST",  # always there: an attempt of an event no longer stored sends nothing
        task.destination_url,
        merge(
            forwardable(captured_headers(task.headers or {}, task.headers_base64)),
            task.destination_headers,
        ),
        bytes(task.body or b""),
    )
    transformed = await transforms.apply(task, captured) if task.transform_digest is not None else None
    request = captured if transformed is None else transformed.request
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


def unsent(record: TransformRecord) -> tuple[Outcome, str, str | None]:
    """The outcome of an attempt the transform kept from being sent, the task's status and its error:
    skipped is done (succeeded); failed is failed for good, neither retried (the same input gives the same
    result: retry it after changing the code) nor counted against the destination's circuit. A replay's
    transform is judged the same way (``control.service.replay``)."""
    if record.outcome == "skipped":
        return Outcome(status=None, latency_ms=0, sent_headers={}), "succeeded", None
    error = record.error
    where = f" (line {error.line})" if error is not None and error.line is not None else ""
    text = f"transform failed: {error.message if error else 'unknown error'}{where}"
    return Outcome(status=None, latency_ms=0, sent_headers={}, error=text, permanent=True), "failed", text
