"""When a failed delivery attempt is tried again (svix's model: a fixed schedule, jittered).

The default schedule (docs/reference/delivery.md) waits 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h and 12 h after
attempts 1 to 9, so a task gets 10 attempts over about 23 hours; ``HOOKYARD_RETRY_SCHEDULE_S`` replaces it
(tests shorten it to fractions of a second). A ``Retry-After`` on a 429 or 503 is honoured when it asks for
longer than the schedule would wait, up to :data:`MAX_RETRY_AFTER_S`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime

__all__ = ("DEFAULT_SCHEDULE_S", "JITTER", "MAX_RETRY_AFTER_S", "max_attempts", "next_delay_s", "parse_retry_after")

DEFAULT_SCHEDULE_S = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 10800.0, 21600.0, 43200.0)

JITTER = 0.2
"""±20% on every scheduled wait, so the retries of a burst that failed together do not return together."""

MAX_RETRY_AFTER_S = 86_400.0
"""A destination cannot park a task for longer than a day with one header."""


def max_attempts(schedule: Sequence[float]) -> int:
    """The first attempt plus one per scheduled wait."""
    return len(schedule) + 1


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from ``Retry-After`` (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        at = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        return None
    seconds = at.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def next_delay_s(
    attempts_done: int,
    schedule: Sequence[float],
    *,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
) -> float | None:
    """Seconds until the next attempt after ``attempts_done`` attempts failed; None when none remain."""
    if attempts_done < 1 or attempts_done > len(schedule):
        return None
    uniform = (rng or random).uniform
    delay = schedule[attempts_done - 1] * uniform(1 - JITTER, 1 + JITTER)
    if retry_after_s is not None and retry_after_s > delay:
        delay = retry_after_s
    return delay
