"""``bench delivery``'s throughput rounds (``bench.rounds``): the order of plain and transformed rounds favours
neither kind. This machine gives more CPU early in a run (the first of two runs won 9 pairs of 10 either way, ADR
0060); with plain first in every pair and each kind's best round compared, a transform that cost nothing still read
below 1, by the order alone."""

from __future__ import annotations

from bench.delivery import TARGETS
from bench.rounds import ORDER, ROUNDS, Round, summary


def _rounds(speed_at: list[float], per_round: int = 10_000) -> list[Round]:
    """Rounds in ``ORDER`` whose rate is ``speed_at[position]`` whichever kind runs there: a transform that costs
    nothing, on a machine whose speed drifts."""
    return [
        Round(
            transformed=kind,
            delivered=per_round,
            seconds=per_round / speed,
            cpu_s=per_round * 100e-6,
            pg_s=None,
            own_s=per_round * 90e-6,
        )
        for kind, speed in zip(ORDER, speed_at, strict=True)
    ]


def test_each_kind_holds_the_same_positions_on_average() -> None:
    plain = [i for i, kind in enumerate(ORDER) if not kind]
    transformed = [i for i, kind in enumerate(ORDER) if kind]
    assert len(plain) == len(transformed) == ROUNDS >= 2
    assert sum(plain) == sum(transformed)  # a linear drift cancels
    assert sum(i * i for i in plain) == sum(i * i for i in transformed)  # and a quadratic one
    pairs = list(zip(ORDER[::2], ORDER[1::2], strict=True))
    assert all(a != b for a, b in pairs)
    assert sum(1 for a, _ in pairs if not a) == sum(1 for a, _ in pairs if a)  # as often plain first as not


def test_a_free_transform_reads_1_under_a_drift() -> None:
    slowing = [8_000 - 400 * i for i in range(len(ORDER))]  # early bursts: each round slower than the last
    figures = summary(_rounds(slowing))
    assert abs(figures["transformed_ratio"] - 1) <= 0.005  # the median of pairs: each pair's order, then as many
    # the other way round (the old bench, plain first and the best rounds compared: 7,600 / 8,000 = 0.95)
    assert figures["transform_us_per_delivery"] == 0.0
    assert figures["rates_ratio"] == 1.0
    quadratic = [5_000 + 60 * (i - 3) ** 2 for i in range(len(ORDER))]
    assert summary(_rounds(quadratic))["rates_ratio"] == 1.0


def test_one_round_hit_by_the_machine_s_other_load_moves_one_pair_not_the_ratio() -> None:
    speeds = [6_000 if not kind else 5_000 for kind in ORDER]
    speeds[1] = 1_000  # a transformed round while another process took the cores
    speeds[6] = 1_500  # a plain one
    figures = summary(_rounds(speeds))
    assert figures["transformed_ratio"] == 0.833
    assert figures["rates_ratio"] != 0.833


def test_per_round_figures_and_the_ratio_last() -> None:
    figures = summary(_rounds([6_000 if not kind else 5_000 for kind in ORDER]))
    assert figures["plain_rounds_per_s"] == ",".join(["6000"] * ROUNDS)
    assert figures["transformed_rounds_per_s"] == ",".join(["5000"] * ROUNDS)
    assert figures["pair_ratios"] == ",".join(["0.833"] * ROUNDS)
    assert figures["rates_ratio"] == 0.833
    assert (figures["deliveries_per_s"], figures["transformed_per_s"]) == (6_000, 5_000)
    assert figures["pg_cpu_us_per_delivery"] == "n/a"
    assert figures["worker_cpu_us_per_delivery"] == 100.0
    assert figures["transformed_worker_cpu_us_per_delivery"] == 90.0
    assert list(figures)[-1] == "transformed_ratio"
    assert figures["transformed_ratio"] == 0.833
    throughput_keys = {t.key for t in TARGETS if "first_attempt" not in t.key}
    assert throughput_keys <= set(figures)  # the RESULTS rows read what the rounds give
