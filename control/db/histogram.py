"""The fixed log-scale latency histogram of the delivery stats: its buckets, and percentiles read from it.

Stats are counted as attempts are recorded and summed over a window later, so latencies cannot be kept one
by one; a histogram over fixed buckets can be added up minute by minute and hour by hour. The bounds follow
a 1-1.2-1.5-2-2.5-3-4-5-6-8 series per decade (every integer up to 6 ms): neighbouring bounds are at most a
third apart, so a percentile read from the histogram is the true one within one bucket.

Bucket ``i`` holds the latencies ``v`` (integer milliseconds) with ``BOUNDS_MS[i-1] < v <= BOUNDS_MS[i]``
(bucket 0: ``v <= 0``); one last bucket holds everything above the last bound. A percentile is reported as
the upper bound of the bucket holding it: the true value is at most that and above the bound before it.
The overflow bucket is reported as the last bound (an attempt cannot last that long: the delivery timeout
ends it first). The bounds are stored with no row; changing them needs a migration of the stored counts.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

__all__ = ("BOUNDS_MS", "SIZE", "bucket", "histogram", "percentile")

BOUNDS_MS: tuple[int, ...] = (
    0, 1, 2, 3, 4, 5, 6, 8,
    10, 12, 15, 20, 25, 30, 40, 50, 60, 80,
    100, 120, 150, 200, 250, 300, 400, 500, 600, 800,
    1_000, 1_200, 1_500, 2_000, 2_500, 3_000, 4_000, 5_000, 6_000, 8_000,
    10_000, 12_000, 15_000, 20_000, 25_000, 30_000, 40_000, 50_000, 60_000, 80_000,
    100_000, 120_000,
)  # fmt: skip
SIZE = len(BOUNDS_MS) + 1
"""Buckets in a histogram: one per bound and the overflow."""


def bucket(latency_ms: int) -> int:
    """The index of the bucket holding ``latency_ms``."""
    return bisect.bisect_left(BOUNDS_MS, latency_ms)


def histogram(latencies_ms: Sequence[int | None]) -> list[int]:
    """The counts per bucket of these latencies (None, an attempt without one, is left out)."""
    counts = [0] * SIZE
    for latency in latencies_ms:
        if latency is not None:
            counts[bucket(latency)] += 1
    return counts


def percentile(counts: Sequence[int], q: float) -> int | None:
    """The ``q`` quantile (0 < q <= 1, nearest rank) as its bucket's upper bound; None for no latencies."""
    total = sum(counts)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total - 1e-9))
    seen = 0
    for i, n in enumerate(counts):
        seen += n
        if seen >= rank:
            return BOUNDS_MS[min(i, len(BOUNDS_MS) - 1)]
    return BOUNDS_MS[-1]
