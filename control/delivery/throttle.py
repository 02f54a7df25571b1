"""Per-destination rate limits, shared by every deliver worker through one Redis key per destination
(issue 27; the design: docs/adr/0036-delivery-shaping-state.md).

The key holds the time the destination's next send may start (GCRA's theoretical arrival time, in Redis's
own clock, so workers with skewed clocks agree). A worker that claimed tasks of a limited destination
reserves start times for them in one call: the next free one and then one every ``1 / (HEADROOM * rate)``
seconds, as far as ``horizon_s`` ahead, and moves the key past the last. Its sends wait for their start time
(the lease covers the horizon many times over); what the horizon had no room for goes back unsent. So any
second holds at most ``rate`` starts (for a whole-number rate), across all workers, retries included, and no
burst is saved up while the destination is idle.

Redis's start times are turned into the worker's ``time.monotonic()`` through a ``Clock``: bounds on the
offset between the two, from when each call was asked and answered. A start is sent no earlier than the
latest moment it can be and no later than ``late_s`` after the earliest (``Slot``), so a slow call makes
its starts unusable (they are reserved again) rather than early or late (ADR 0036's amendment of 2026-12-04).

A ``Retry-After`` from a limited destination moves the key past the pause as well, so no worker reserves a
start within it; the deliver loop also stops the pausing worker's own waiting sends and records the pause in
Postgres for everyone's claims (``control.db.circuit.pause``).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

__all__ = ("HEADROOM", "Clock", "Grant", "Slot", "pause", "reserve")

HEADROOM = 0.95
"""Starts are spaced for this share of the rate. What the destination sees is arrivals, not starts: a
worker or a receiver that stalls for a moment (CPU contention on a shared machine) bunches the requests
that were in flight, so a second at the receiver can hold more than a second of starts. At exactly the
rate, with a late start allowed 20 ms (``shaping.LATE_S``), a second held up to ``1.02 * rate + 1`` starts,
and a suite run saw 56 arrivals in a second at a limit of 50. At 95% a second holds at most ``rate``
starts (``floor(0.969 * rate) + 1``), and at 50/s a stall of about 120 ms still keeps a second under 55
(docs/adr/0036-delivery-shaping-state.md)."""

# ARGV: interval (ms), starts wanted, horizon (ms), pause (ms; > 0: pause, reserve nothing).
# Returns {starts granted, ms from now to the first (or to the next free start when none), now in ms; as text}.
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
  return {0, string.format('%.3f', wait), string.format('%.3f', now)}
end
redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
return {n, string.format('%.3f', wait), string.format('%.3f', now)}
"""
_SHA = hashlib.sha1(_SCRIPT.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1


DRIFT = 5e-4
"""How fast Redis's clock (wall time) and a worker's ``time.monotonic()`` may drift apart, per second: the
most NTP slews a clock (500 ppm). Bounds learnt earlier widen by it as they age."""


class Clock:
    """Where Redis's clock stands against this worker's ``time.monotonic()``: ``redis = local + offset``, with
    the offset between ``lo`` and ``hi``. A call that Redis ran at ``now`` (its clock), asked at ``asked`` and
    answered at ``answered`` (ours), ran in between, so the offset is within ``[now - answered, now - asked]``.
    One call alone was not enough: asked-at placement put every start of a call that reached Redis late (an
    event loop busy before the command was written, a busy Redis) early by that delay, onto the starts
    reserved before it (a suite run saw 51 starts in a second at a limit of 50; instrumented runs under load
    measured starts up to 17 ms before Redis's); answered-at placement, late by a slow answer, once put 99 in a
    second. Each call's bounds are intersected with the earlier ones (aged by ``DRIFT``), so one quick call
    in a while keeps them within a millisecond however slow the others are. They always lie within the
    latest call's own, so a clock stepped in between costs no more than that call's duration; bounds that
    no longer meet (a step) start again from the latest call. One per destination's key: on a Redis Cluster
    the keys of two destinations may be on nodes whose clocks differ."""

    __slots__ = ("at", "hi", "lo")

    def __init__(self) -> None:
        self.lo, self.hi, self.at = -math.inf, math.inf, 0.0

    def learn(self, now: float, asked: float, answered: float) -> None:
        """One call's bounds: ``now`` in Redis's clock, ``asked`` and ``answered`` in ours (seconds)."""
        aged = DRIFT * max(0.0, answered - self.at)
        lo, hi = max(self.lo - aged, now - answered), min(self.hi + aged, now - asked)
        if lo > hi:
            lo, hi = now - answered, now - asked
        self.lo, self.hi, self.at = lo, hi, answered


@dataclass(frozen=True, slots=True)
class Slot:
    """When a reserved start may go, in ``time.monotonic()``: not before ``at`` (the latest moment Redis's
    start can be in our clock), not after ``until`` (``late_s`` after the earliest). ``until < at``: the
    clock is not known well enough for this start, which is then reserved again."""

    at: float
    until: float


@dataclass(frozen=True, slots=True)
class Grant:
    count: int
    """Starts reserved (0: none within the horizon)."""
    first_at: float
    """``time.monotonic()`` of the first reserved start, the latest it can be; with none, of the destination's
    next free start."""
    interval_s: float
    spread_s: float
    """How much earlier than ``first_at`` the first start may be (the width of the clock's bounds)."""

    def start_at(self, index: int) -> float:
        """``time.monotonic()`` of the ``index``-th reserved start, the latest it can be."""
        return self.first_at + index * self.interval_s

    def slot(self, index: int, late_s: float) -> Slot:
        """When the ``index``-th reserved start may go, at most ``late_s`` after Redis's start time."""
        at = self.start_at(index)
        return Slot(at, at - self.spread_s + late_s)


async def _run(redis: aioredis.Redis, key: str, *args: str | int) -> tuple[int, float, float, float, float]:
    """(count, seconds from the script's "now" to the answer's time, that "now" in Redis's clock, and
    ``time.monotonic()`` when it was asked and when answered)."""
    try:
        asked = time.monotonic()
        count, wait_ms, now_ms = await redis.evalsha(_SHA, 1, key, *args)
    except NoScriptError:
        await redis.script_load(_SCRIPT)
        asked = time.monotonic()
        count, wait_ms, now_ms = await redis.evalsha(_SHA, 1, key, *args)
    return int(count), float(wait_ms) / 1000, float(now_ms) / 1000, asked, time.monotonic()


async def reserve(
    redis: aioredis.Redis, key: str, clock: Clock, *, rate_per_s: float, wanted: int, horizon_s: float
) -> Grant:
    """Up to ``wanted`` start times at ``rate_per_s`` (with ``HEADROOM``), none later than ``horizon_s`` from
    now; ``clock`` (the key's) learns from the call."""
    interval_ms = 1000.0 / (rate_per_s * HEADROOM)
    count, first_s, now, asked, answered = await _run(redis, key, repr(interval_ms), wanted, repr(horizon_s * 1000), 0)
    clock.learn(now, asked, answered)
    # Redis's first start is at ``now + first_s`` in its clock: at most ``clock.lo`` ahead of ours.
    return Grant(count, now + first_s - clock.lo, interval_ms / 1000, clock.hi - clock.lo)


async def pause(redis: aioredis.Redis, key: str, seconds: float) -> None:
    """No start is reserved within the next ``seconds`` (a ``Retry-After``)."""
    await _run(redis, key, "1", 0, "0", repr(seconds * 1000))
