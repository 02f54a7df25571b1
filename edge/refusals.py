"""Requests the edge refuses (a signature rejected, a source not on the allowlist), counted per endpoint for
its stats without touching the hot path.

Accepted requests never come here. A refusal adds one to a dict entry in this process (no I/O, no await);
a task of the edge's lifespan adds the counts to Redis about once a second in one pipeline
(``shared.refusals`` says how Redis holds them), and a last time at shutdown. A write that fails is put
back for the next round (the counts of a pipeline Redis partly applied before failing may then count
twice): a Redis outage delays the stats, it does not lose them, and what no window reads any more is dropped.

Shutdown lets the round in progress finish rather than cancel it: a cancellation can cut off the reply to a
pipeline Redis has already applied, and its counts, put back, were then written again by the last round (the
suite saw an endpoint's refusals counted twice after its edge stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from shared.keys import Keys
from shared.refusals import KEEP_S, SIGNATURE_REASONS, expires_at, field

__all__ = ("CLOSE_S", "FLUSH_EVERY_S", "Refusals")

FLUSH_EVERY_S = 1.0
"""How often the counts go to Redis: stats lag a refusal by about this much."""

CLOSE_S = 2.0
"""How long shutdown waits for the round in progress and the last one; what Redis has not taken by then is
lost (and logged): the process is going."""

_LOG_EVERY_S = 60.0

log = logging.getLogger("hookyard.edge")


class Refusals:
    """Counts by (endpoint id, reason, minute), taken by ``flush``."""

    __slots__ = ("_failed_at", "_keys", "_stopping", "_task", "counts")

    def __init__(self, keys: Keys) -> None:
        self._keys = keys
        self.counts: dict[tuple[str, str, int], int] = {}
        self._failed_at = -_LOG_EVERY_S
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, redis: Any, every_s: float = FLUSH_EVERY_S) -> None:
        """Starts the lifespan's task: a flush every ``every_s`` until ``close``."""
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._run(redis, every_s), name="edge-refusals")

    async def close(self, redis: Any, timeout_s: float = CLOSE_S) -> None:
        """Stops the task and writes what is left, within ``timeout_s``: the round in progress finishes (never
        cancelled, see the module's docstring), then a last one; a task that ended already (cancelled, or
        never started) leaves the last one to this call."""
        task, self._task = self._task, None
        self._stopping.set()
        try:
            async with asyncio.timeout(timeout_s):
                if task is not None and not task.done():
                    await task
                await self.flush(redis)
        except Exception as exc:  # noqa: BLE001 - Redis away or too slow at shutdown: those counts are lost
            log.warning("refusal counts lost at shutdown: %r", exc)

    def add(self, endpoint_id: str, reason: str, now: float) -> None:
        """One refused request of ``endpoint_id`` at ``now`` (Unix time), for ``reason``."""
        key = (endpoint_id, reason, int(now) // 60)
        counts = self.counts
        counts[key] = counts.get(key, 0) + 1

    async def flush(self, redis: Any) -> int:
        """Adds what was counted since the last flush to Redis; how many refusals went. Raises what Redis
        raises, with the counts kept for the next call."""
        if not self.counts:
            return 0
        taken, self.counts = self.counts, {}
        keys = self._keys
        pipe = redis.pipeline(transaction=False)
        hours: dict[str, int] = {}
        signatures: dict[str, int] = {}
        for (endpoint_id, reason, minute), count in taken.items():
            hour = minute // 60
            key = keys.edge_refusals(endpoint_id, hour)
            pipe.hincrby(key, field(minute, reason), count)
            hours[key] = hour
            if reason in SIGNATURE_REASONS:
                signatures[endpoint_id] = max(minute, signatures.get(endpoint_id, 0))
        for key, hour in hours.items():
            pipe.expireat(key, expires_at(hour))
        if signatures:  # which endpoints the alert evaluator reads (``Keys.signature_refusals_recent``)
            pipe.zadd(keys.signature_refusals_recent, signatures, gt=True)
            pipe.expire(keys.signature_refusals_recent, KEEP_S)
        try:
            await pipe.execute()
        except BaseException:
            oldest = (int(time.time()) - KEEP_S) // 60
            counts = self.counts
            for counted, count in taken.items():
                if counted[2] >= oldest:
                    counts[counted] = counts.get(counted, 0) + count
            raise
        return sum(taken.values())

    async def _run(self, redis: Any, every_s: float) -> None:
        """A flush every ``every_s``, and one more once stopping; a failure is logged once a minute at most."""
        stopping = self._stopping
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), every_s)
            try:
                await self.flush(redis)
            except Exception as exc:  # noqa: BLE001 - Redis away: counted again next round
                now = time.monotonic()
                if now - self._failed_at >= _LOG_EVERY_S:
                    self._failed_at = now
                    log.warning("refusal counts not written to Redis (kept for the next try): %r", exc)
