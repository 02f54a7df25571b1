"""The signatures the edges refused, per endpoint, over the alert window: what ``endpoint.signature_failures``
counts besides the stored events whose signature failed (``on_failure: accept_log``).

A refused request (401, ``on_failure: reject``) is stored nowhere: the edges count it in Redis
(``shared.refusals``: a hash per endpoint and hour, ``edge.refusals``) and name the endpoint in
``Keys.signature_refusals_recent`` with the minute of its last refusal. The evaluator reads that set for the
endpoints refused within the window, then only their hashes (one pipeline), so a round costs the same
however many endpoints exist; entries older than the window are trimmed here.
"""

from __future__ import annotations

import time

from control.db.alert_conditions import SIGNATURE_WINDOW_MINUTES
from control.db.context import Context
from shared.refusals import SIGNATURE_REASONS, parse

__all__ = ("refused_signatures",)


async def refused_signatures(ctx: Context, now: float | None = None) -> dict[str, int]:
    """endpoint id -> signatures refused in the current minute and the four before it (the window of the
    stored failures, ``control.db.alert_conditions.signature_failures``)."""
    minute = int(time.time() if now is None else now) // 60
    first = minute - (SIGNATURE_WINDOW_MINUTES - 1)
    recent = ctx.keys.signature_refusals_recent
    found = await ctx.redis.zrangebyscore(recent, first, "+inf")
    await ctx.redis.zremrangebyscore(recent, "-inf", f"({first}")
    # without scores each member is bytes (str on a decoding client): the filter only narrows the type
    endpoint_ids = [e.decode() if isinstance(e, bytes) else e for e in found if isinstance(e, bytes | str)]
    if not endpoint_ids:
        return {}
    hours = range(first // 60, minute // 60 + 1)
    pipe = ctx.redis.pipeline(transaction=False)
    for endpoint_id in endpoint_ids:
        for hour in hours:
            pipe.hgetall(ctx.keys.edge_refusals(endpoint_id, hour))
    answers = iter(await pipe.execute())
    counts: dict[str, int] = {}
    for endpoint_id in endpoint_ids:
        total = 0
        for hour in hours:
            for name, value in next(answers).items():
                parsed = parse(name)
                if parsed is not None and parsed[1] in SIGNATURE_REASONS and first <= hour * 60 + parsed[0] <= minute:
                    total += int(value)
        if total:
            counts[endpoint_id] = total
    return counts
