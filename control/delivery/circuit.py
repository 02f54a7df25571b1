"""The circuit breaker's decisions (the state lives on ``destinations``; see ``control.db.circuit``).

A destination that failed ``HOOKYARD_CIRCUIT_FAILURE_THRESHOLD`` attempts in a row opens its circuit:
its due tasks are pushed back without an attempt (nothing is lost, no attempt is spent) until
``HOOKYARD_CIRCUIT_COOLDOWN_S`` has passed; then one worker takes the single probe (half_open). The probe's
success closes the circuit, its failure opens it for another cool-down. Every failed attempt counts:
a destination answering 500, 404 or nothing at all is equally unable to take deliveries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

__all__ = ("PROBE_WAIT_S", "gate", "summarize")

PROBE_WAIT_S = 5.0
"""Longest push-back of a task while its destination's probe is in flight, so a recovered destination
gets its backlog soon after the probe succeeds rather than a full cool-down later."""


def gate(circuit: str, open_for_s: float | None, cooldown_s: float) -> tuple[Literal["send", "probe", "wait"], float]:
    """What to do with a due task of a destination in this state: send it, try to take the probe, or wait
    the returned seconds (pushed back)."""
    if circuit == "closed" or open_for_s is None:
        return "send", 0.0
    remaining = cooldown_s - open_for_s
    if remaining > 0:
        return "wait", min(remaining, PROBE_WAIT_S) if circuit == "half_open" else remaining
    return "probe", 0.0


def summarize(outcomes: Iterable[tuple[str, bool]]) -> tuple[list[str], list[tuple[str, bool, int]]]:
    """Folds a batch of ``(destination_id, success)`` (in completion order) into what the circuit table
    needs: destinations whose last outcome succeeded, and ``(destination_id, reset, failures)`` for the
    others, where ``failures`` counts those after the batch's last success (``reset``) or all of them."""
    trailing: dict[str, int] = {}
    reset: dict[str, bool] = {}
    for destination_id, success in outcomes:
        if success:
            trailing[destination_id] = 0
            reset[destination_id] = True
        else:
            trailing[destination_id] = trailing.get(destination_id, 0) + 1
            reset.setdefault(destination_id, False)
    succeeded = [d for d, n in trailing.items() if n == 0]
    failed = [(d, reset[d], n) for d, n in trailing.items() if n > 0]
    return succeeded, failed
