"""The moments of one exchange (DNS answered, connected, TLS up, first response byte), for the attempt's span.

Only the transport and its connector see these moments, and only a traced send wants them: the send sets
:data:`TIMINGS` for its task (``control.delivery.tracing``), the connector and the transport mark what they
get to, and everything else reads ``None`` from the context variable and does nothing more (one lookup per
exchange; a kept-alive connection has no DNS, connect or TLS of its own).
"""

from __future__ import annotations

import contextvars
import time

__all__ = ("TIMINGS", "Timings", "mark")


class Timings:
    """``time.perf_counter()`` of each moment reached (0.0: not reached)."""

    __slots__ = ("connect_started", "connected", "first_byte", "resolved", "reused", "started", "tls")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.connect_started = self.resolved = self.connected = self.tls = self.first_byte = 0.0
        self.reused = False

    def durations_ms(self, ended: float) -> dict[str, float]:
        """Milliseconds of each phase reached: ``dns``, ``connect`` (TCP, after the answer), ``tls``,
        ``first_byte`` (from the start of the send) and ``total``."""
        out: dict[str, float] = {}
        if self.resolved:
            out["dns"] = self.resolved - self.connect_started
        if self.connected:
            out["connect"] = self.connected - (self.resolved or self.connect_started)
        if self.tls:
            out["tls"] = self.tls - self.connected
        if self.first_byte:
            out["first_byte"] = self.first_byte - self.started
        out["total"] = ended - self.started
        return {name: round(seconds * 1000, 3) for name, seconds in out.items()}


TIMINGS: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("hookyard_timings", default=None)


def mark(moment: str) -> None:
    """Notes ``moment`` (a slot of :class:`Timings`) now, when the running send is timed."""
    timings = TIMINGS.get()
    if timings is not None and not getattr(timings, moment):
        setattr(timings, moment, time.perf_counter())
