"""Token buckets in Redis, so a limit holds across every control process. The one mechanism behind every
limit: per credential on the authenticated surfaces and per account for outbound sends
(``control.support.rate_limits``), per client address on the unauthenticated provisioning routes
(``control.api.public``).

The bucket refills at ``rate`` tokens a second (a fraction for per-minute limits) up to ``burst``; Redis's own
clock (``TIME``) is used so control nodes with skewed clocks agree. The script is run by its SHA, loaded on
first use by whichever Redis (or cluster node) answers ``NOSCRIPT``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from control.support.metrics import RATE_LIMITED
from shared.errors import RateLimitedError

__all__ = ("Limit",)

_SCRIPT = """
local now_t = redis.call('TIME')
local now = tonumber(now_t[1]) * 1000 + math.floor(tonumber(now_t[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait_ms
"""
_SHA = hashlib.sha1(_SCRIPT.encode()).hexdigest()  # noqa: S324 - Redis names scripts by SHA-1


@dataclass(frozen=True, slots=True)
class Limit:
    """One kind of limit; each key charged with it is a bucket of its own. ``subject`` names what one bucket
    belongs to, in the 429 message and as the ``limit`` label of ``hookyard_rate_limited_total``."""

    rate_per_s: float
    burst: int
    subject: str

    def __post_init__(self) -> None:
        if self.rate_per_s <= 0 or self.burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")

    async def charge(self, redis: aioredis.Redis, key: str) -> None:
        """Takes one token from ``key``'s bucket, or raises ``RateLimitedError`` saying when one is back."""
        args = (repr(float(self.rate_per_s)), self.burst)
        try:
            wait_ms = await redis.evalsha(_SHA, 1, key, *args)
        except NoScriptError:
            await redis.script_load(_SCRIPT)
            wait_ms = await redis.evalsha(_SHA, 1, key, *args)
        if int(wait_ms) > 0:
            RATE_LIMITED.inc((self.subject,))
            retry_after = max(1, -(-int(wait_ms) // 1000))
            raise RateLimitedError(
                f"{self._rate()} exceeded for {self.subject}; retry in {retry_after} s", retry_after_s=retry_after
            )

    def _rate(self) -> str:
        rate = f"{self.rate_per_s:g}/s" if self.rate_per_s >= 1 else f"{self.rate_per_s * 60:g}/min"
        return f"rate limit of {rate} (burst {self.burst})"
