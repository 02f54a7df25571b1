"""Per-key token bucket in Redis, so the limit holds across every control process.

The bucket refills at ``rate`` tokens a second up to ``burst``; Redis's own clock (``TIME``) is used so
control nodes with skewed clocks agree.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from shared.errors import RateLimitedError

__all__ = ("RateLimiter",)

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


class RateLimiter:
    def __init__(self, redis: aioredis.Redis, *, rate_per_s: int, burst: int) -> None:
        if rate_per_s < 1 or burst < 1:
            raise ValueError("rate and burst must be >= 1")
        self._script = redis.register_script(_SCRIPT)
        self._rate = rate_per_s
        self._burst = burst

    async def hit(self, key: str) -> None:
        """Takes one token or raises ``RateLimitedError`` with the seconds until one is available."""
        wait_ms = int(await self._script(keys=[key], args=[self._rate, self._burst]))
        if wait_ms > 0:
            raise RateLimitedError(
                f"rate limit of {self._rate}/s (burst {self._burst}) exceeded for this API key",
                retry_after_s=max(1, -(-wait_ms // 1000)),
            )
