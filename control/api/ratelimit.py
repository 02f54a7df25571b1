"""Token buckets in Redis, so a limit holds across every control process: per API key on /v1 (and /mcp), per
client address on the unauthenticated provisioning routes (``/api/start``, ``/api/register``).

The bucket refills at ``rate`` tokens a second (a fraction for per-minute limits) up to ``burst``; Redis's own
clock (``TIME``) is used so control nodes with skewed clocks agree.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from control.service.metrics import RATE_LIMITED
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
    def __init__(self, redis: aioredis.Redis, *, rate_per_s: float, burst: int, subject: str = "this API key") -> None:
        """``subject`` names what one bucket belongs to, in the 429 message."""
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self._script = redis.register_script(_SCRIPT)
        self._rate = rate_per_s
        self._burst = burst
        rate = f"{rate_per_s:g}/s" if rate_per_s >= 1 else f"{rate_per_s * 60:g}/min"
        self._message = f"rate limit of {rate} (burst {burst}) exceeded for {subject}"
        self._subject = subject

    async def hit(self, key: str) -> None:
        """Takes one token or raises ``RateLimitedError`` with the seconds until one is available."""
        wait_ms = int(await self._script(keys=[key], args=[repr(float(self._rate)), self._burst]))
        if wait_ms > 0:
            RATE_LIMITED.inc((self._subject,))
            raise RateLimitedError(self._message, retry_after_s=max(1, -(-wait_ms // 1000)))
