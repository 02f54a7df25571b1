"""The alerts loop: evaluates the alert conditions every ``evaluate_every_s`` (one worker at a time, see
``control.workers.alerts.evaluator``) and sends the due alerts (``control.workers.alerts.sender``).

Five seconds between evaluations keeps "fired within 30 s of the condition" with room for a slow round;
an evaluation is a handful of indexed queries, so running it that often costs nothing measurable.
"""

from __future__ import annotations

import logging
import time

from control.db.context import Context
from control.workers.alerts.evaluator import evaluate
from control.workers.alerts.sender import AlertSender

__all__ = ("Alerts",)

log = logging.getLogger("hookyard.worker.alerts")


class Alerts:
    name = "alerts"

    def __init__(self, ctx: Context, *, evaluate_every_s: float = 5.0, idle_s: float = 1.0) -> None:
        self.ctx = ctx
        self.evaluate_every_s = evaluate_every_s
        self.idle_s = idle_s
        self._next_evaluation = 0.0
        self.sender = AlertSender(ctx)

    async def step(self) -> int:
        if time.monotonic() >= self._next_evaluation:
            self._next_evaluation = time.monotonic() + self.evaluate_every_s
            result = await evaluate(self.ctx)
            if result.fired or result.resolved:
                log.info("alerts: %d fired, %d resolved", len(result.fired), len(result.resolved))
        return await self.sender.step()

    async def close(self) -> None:
        await self.sender.close()
