"""Per-destination rate limits, shared by every deliver worker through one Redis key per destination
(issue 27; the design: docs/adr/0036-delivery-shaping-state.md).

The key holds the time the destination's next send may start (GCRA's theoretical arrival time, in Redis's
own clock, so workers with skewed clocks agree). A worker that claimed tasks of a limited destination
reserves start times for them in one call: the next free one and then one every ``1 / (HEADROOM * rate)``
seconds, as far as ``horizon_s`` ahead, and moves the key past the last. Its sends wait for their start time
(the lease covers the horizon many times over); what the horizon had no room for goes back unsent. So any
second holds at most ``rate`` starts (for a whole-number rate), across all workers, retries included, and no
burst is saved up while the destination is idle.

A ``Retry-After`` from a limited destination moves the key past the pause as well, so no worker reserves a
start within it; the deliver loop also stops the pausing worker's own waiting sends and records the pause in
Postgres for everyone's claims (``control.db.circuit.pause``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

__all__ = ("HEADROOM", "Grant", "pause", "reserve")

HEADROOM = 0.95
"""Starts are spaced for this share of the rate. What the destination sees is arrivals, not starts: a
worker or a receiver that stalls for a moment (CPU contention on a shared machine) bunches the requests
that were in flight, so a second at the receiver can hold more than a second of starts. At exactly the
rate, with a late start allowed 20 ms (``shaping.LATE_S``), a second held up to ``1.02 * rate + 1`` starts,
and a suite run saw 56 arrivals in a second at a limit of 50. At 95% a second holds at most ``rate``
starts (``floor(0.969 * rate) + 1``), and at 50/s a stall of about 120 ms still keeps a second under 55
(docs/adr/0036-delivery-shaping-state.md)."""

# ARGV: interval (ms), starts wanted, horizon (ms), pause (ms; > 0: pause, reserve nothing).
# Returns {starts granted, ms from now to the first (or to the next free start when none), as text}.
_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local horizon = tonumber(ARGV[3])
local pause = tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local wait = tat - now
local n = 0
if pause > 0 then
  if now + pause > tat then tat = now + pause end
  wait = tat - now
elseif want > 0 and wait <= horizon then
  n = math.min(want, math.floor((horizon - wait) / interval) + 1)
  tat = tat + n * interval
else
  return {0, string.format('%.3f', wait)}
end
redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
return {n, string.format('%.3f', wait)}
"""
_SHA = hashlib.sha1(_SCRIPT.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1


@dataclass(frozen=True, slots=True)
class Grant:
    count: int
    """Starts reserved (0: none within the horizon)."""
    first_at: float
    """``time.monotonic()`` of the first reserved start; with none, of the destination's next free start."""
    interval_s: float

    def start_at(self, index: int) -> float:
        """``time.monotonic()`` of the ``index``-th reserved start."""
        return self.first_at + index * self.interval_s


async def _run(redis: aioredis.Redis, key: str, *args: str | int) -> tuple[int, float, float]:
    """(count, seconds from the script's "now" to the answer's time, ``time.monotonic()`` when it was asked)."""
    try:
        asked = time.monotonic()
        count, wait_ms = await redis.evalsha(_SHA, 1, key, *args)
    except NoScriptError:
        await redis.script_load(_SCRIPT)
        asked = time.monotonic()
        count, wait_ms = await redis.evalsha(_SHA, 1, key, *args)
    return int(count), float(wait_ms) / 1000, asked


async def reserve(redis: aioredis.Redis, key: str, *, rate_per_s: float, wanted: int, horizon_s: float) -> Grant:
    """Up to ``wanted`` start times at ``rate_per_s`` (with ``HEADROOM``), none later than ``horizon_s`` from
    now."""
    interval_ms = 1000.0 / (rate_per_s * HEADROOM)
    count, first_s, asked = await _run(redis, key, repr(interval_ms), wanted, repr(horizon_s * 1000), 0)
    # Placed from when the script was asked for, not from when its answer was read: an answer read late (the
    # loop stalled) would move every start later by the stall, onto starts other workers reserved since, and
    # a second at the destination could hold twice the rate. Asked-at placement makes them late instead, and
    # a late start is reserved again. It can be early by the time the request took to reach Redis (loopback:
    # well under a millisecond).
    return Grant(count, asked + first_s, interval_ms / 1000)


async def pause(redis: aioredis.Redis, key: str, seconds: float) -> None:
    """No start is reserved within the next ``seconds`` (a ``Retry-After``)."""
    await _run(redis, key, "1", 0, "0", repr(seconds * 1000))
