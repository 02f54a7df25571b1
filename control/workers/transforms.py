"""A deliver worker's transforms: each destination's code compiled once per version and reused.

A claimed task carries its destination's ``transform_digest`` (the version), not the source; the worker
keeps a ``Sandbox`` per (destination, digest) and loads the source only on a miss. A PATCH of the code is a
new digest, so the next attempt (a retry, a manual or bulk retry) compiles and runs the new version; the
old one is dropped once no longer used, at the latest when ``CAPACITY`` newer ones push it out.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from control.db import destinations as db_destinations
from control.delivery.send import forwardable, merge, signature
from control.records.storable import captured_headers
from control.records.transforms import TransformError, TransformRecord
from control.service import Context
from control.service.transforms import event_context
from control.transform.apply import Outgoing, Result, apply
from control.transform.sandbox import Problem, Sandbox

__all__ = ("CAPACITY", "Transforms", "outgoing", "recorded")

log = logging.getLogger("hookyard.worker.deliver")

CAPACITY = 64
"""Compiled transforms a worker keeps (an isolate each: a thread and a few MB)."""
SWITCH_INTERVAL_S = 0.0005
"""Tuning note: a call's answer comes back on its isolate's thread, which needs the GIL for a moment; a busy
event loop hands the GIL over only when the switch interval (5 ms by default) runs out, so every batch
of calls waited about that long, and a destination's deliveries (32 in flight at most) with it: 1,024
deliveries/s with a trivial transform against 1,714 without, on the 2-core bench machine. The interval
matters only while another thread waits for the GIL, which here is only these answers: set to 0.5 ms once
a worker compiles its first transform."""


class Transforms:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._compiled: OrderedDict[tuple[str, str], Sandbox | Problem] = OrderedDict()
        self._loading: dict[str, asyncio.Lock] = {}

    async def _sandbox(self, destination_id: str, digest: str) -> Sandbox | Problem | None:
        """The compiled version; None when the destination no longer has a transform (removed meanwhile)."""
        key = (destination_id, digest)
        found = self._compiled.get(key)
        if found is not None:
            self._compiled.move_to_end(key)
            return found
        lock = self._loading.setdefault(destination_id, asyncio.Lock())
        async with lock:  # concurrent deliveries of a new version compile it once
            found = self._compiled.get(key)
            if found is None:
                async with self.ctx.pool.acquire() as conn:
                    row = await db_destinations.transform_source(conn, destination_id)
                if row is None or row["transform"] is None:
                    return None
                key = (destination_id, row["transform_digest"])
                if sys.getswitchinterval() > SWITCH_INTERVAL_S:
                    sys.setswitchinterval(SWITCH_INTERVAL_S)
                found = Sandbox.compile(row["transform"])
                if isinstance(found, Problem):  # it compiled when it was written: a V8 of another version?
                    log.error("deliver: transform of %s does not compile: %s", destination_id, found.message)
                self._keep(key, found)
        if len(self._loading) > 4 * CAPACITY:
            self._loading.clear()
        return found

    def _keep(self, key: tuple[str, str], compiled: Sandbox | Problem) -> None:
        for old in [k for k in self._compiled if k[0] == key[0] and k != key]:  # older versions: done with
            self._drop(old)
        self._compiled[key] = compiled
        while len(self._compiled) > CAPACITY:
            self._drop(next(iter(self._compiled)))

    def _drop(self, key: tuple[str, str]) -> None:
        compiled = self._compiled.pop(key)
        if isinstance(compiled, Sandbox):
            compiled.retire()

    async def apply(self, task: Mapping[str, Any], request: Outgoing) -> Result | None:
        """The destination's transform run on the request the task would send; None when it has none."""
        compiled = await self._sandbox(task["destination_id"], task["transform_digest"])
        if compiled is None:
            return None
        if isinstance(compiled, Problem):
            error = TransformError(message=compiled.message, line=compiled.line)
            return Result(None, TransformRecord(outcome="failed", error=error))
        event = {
            "id": task["event_id"],
            "provider": task["provider"],
            "event_type": task["event_type"],
            "received_at": task["event_received_at"],
            "labels": task["labels"],
        }
        destination = {"id": task["destination_id"], "name": task["destination_name"]}
        return await apply(compiled, request, event_context(event, destination))

    def close(self) -> None:
        for compiled in self._compiled.values():
            if isinstance(compiled, Sandbox):
                compiled.close()
        self._compiled.clear()


async def outgoing(
    transforms: Transforms, task: Mapping[str, Any], secret: str | None
) -> tuple[Outgoing | None, Result | None]:
    """What a claimed task sends: its captured request to the destination's URL and headers, run through the
    destination's transform when it has one, then signed with ``secret`` (None: unsigned) over what the
    transform returned. Also what the transform did (None without one). The request is None when the
    transform kept it from being sent (skipped or failed)."""
    request: Outgoing | None = Outgoing(
        task["method"],
        task["destination_url"],
        merge(
            forwardable(captured_headers(task["headers"] or {}, task["headers_base64"])),
            task["destination_headers"],
        ),
        bytes(task["body"] or b""),
    )
    transformed = await transforms.apply(task, request) if task["transform_digest"] is not None else None
    request = request if transformed is None else transformed.request
    if request is not None:
        request.headers = merge(
            request.headers,
            signature(task["event_id"], request.body, secret) if secret is not None else None,
            {"x-hookyard-event-id": task["event_id"], "x-hookyard-delivery-attempt": str(task["attempts"])},
        )
    return request, transformed


def recorded(transformed: Result | None) -> dict[str, Any] | None:
    """The ``deliveries.transform`` value: what the transform did, None without one."""
    return None if transformed is None else msgspec.to_builtins(transformed.record)
