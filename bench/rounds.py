"""The throughput rounds of ``bench delivery``, plain and transformed, in an order that favours neither kind.

On this 2-core machine the first of two runs was the faster in 9 pairs of 10, whichever it was (ADR 0060): CPU
comes in bursts early. With plain first in every pair and the best round of each kind compared, the plain kind
took the bursts and ``transformed_ratio`` was biased low by the order alone. Here each kind holds the same mean
position (ABBA BAAB) and the rates are means over all of a kind's rounds, not its best. The ratio is the
median of adjacent pairs' ratios: the two rounds of a pair ran a second apart, under nearly the same load, and
the load of the others sharing the machine moved a kind's rounds by 2x within one run (8,050 then 3,119/s); a
burst in one round moves one pair's ratio, not the median. Half the pairs run plain first, half transformed
first, so what order alone does cancels there too.
"""

from __future__ import annotations

import statistics

import msgspec

__all__ = ("ORDER", "ROUNDS", "Round", "summary")

ORDER = (False, True, True, False, True, False, False, True) * 2
"""The throughput rounds, transformed or not: ABBA then BAAB, twice, so that each kind's mean position is the same
and a drift over the run (linear or quadratic) weighs on both kinds alike; adjacent rounds pair up, as often
plain first as transformed first."""
ROUNDS = ORDER.count(True)
"""Rounds of each kind."""


class Round(msgspec.Struct, kw_only=True, frozen=True):
    """One throughput round: deliveries, seconds, the CPU seconds of the worker and its sandbox processes, of
    its Postgres backends (None: not found) and of the worker process alone."""

    transformed: bool
    delivered: int
    seconds: float
    cpu_s: float
    pg_s: float | None
    own_s: float


def summary(rounds: list[Round]) -> dict[str, object]:
    """The throughput figures of ``rounds`` (in ``ORDER``'s pattern: adjacent rounds one of each kind): each
    kind's mean rate and the CPU per delivery over all of its rounds, each pair's ratio, and their median,
    ``transformed_ratio``, last (``rates_ratio``: the ratio of the mean rates beside it)."""
    plain = [r for r in rounds if not r.transformed]
    transformed = [r for r in rounds if r.transformed]

    def rate(r: Round) -> float:
        return r.delivered / r.seconds

    plain_rate = statistics.fmean(rate(r) for r in plain)
    with_rate = statistics.fmean(rate(r) for r in transformed)
    n, with_n = sum(r.delivered for r in plain), sum(r.delivered for r in transformed)
    seconds = sum(r.seconds for r in plain)
    pg = [r.pg_s for r in plain]
    pairs = [(a, b) if b.transformed else (b, a) for a, b in zip(rounds[::2], rounds[1::2], strict=True)]
    ratios = [rate(t) / rate(p) for p, t in pairs]
    return {
        "deliveries": plain[0].delivered,
        "seconds": round(seconds / len(plain), 2),
        "deliveries_per_s": round(plain_rate),
        "transformed_per_s": round(with_rate),
        "transform_us_per_delivery": round((1 / with_rate - 1 / plain_rate) * 1e6, 1),  # as the ratio reads
        "worker_cpu_us_per_delivery": round(sum(r.cpu_s for r in plain) / n * 1e6, 1),
        "transformed_cpu_us_per_delivery": round(sum(r.cpu_s for r in transformed) / with_n * 1e6, 1),
        "transformed_worker_cpu_us_per_delivery": round(sum(r.own_s for r in transformed) / with_n * 1e6, 1),
        "pg_cpu_us_per_delivery": "n/a" if None in pg else round(sum(p or 0.0 for p in pg) / n * 1e6, 1),
        "rounds": len(plain),
        "plain_rounds_per_s": ",".join(str(round(rate(r))) for r in plain),
        "transformed_rounds_per_s": ",".join(str(round(rate(r))) for r in transformed),
        "pair_ratios": ",".join(f"{ratio:.3f}" for ratio in ratios),
        "rates_ratio": round(with_rate / plain_rate, 3),
        "transformed_ratio": round(statistics.median(ratios), 3),
    }
