"""The SDK's own OTLP/HTTP exporters, made to say a collector's trouble in two lines and to stop in time.

Imported only once tracing or metrics are on (``shared.tracing``): it imports the SDK.

As shipped, the exporter logs a WARNING at each retry of a batch and an ERROR when it gives one up, and never
says it recovered: a collector that was down wrote 18 lines for 2 webhooks, and would write thousands on a
busy edge. Here each export of ours runs with what the SDK logs on that thread set aside (its last message
kept as the reason), and :class:`Health` says one line when exports start failing and one when they succeed
again, the failing line at most every ``REPEAT_AFTER_S`` (a flapping collector). The SDK's own retries and
their bound are kept as they are: ``OTEL_EXPORTER_OTLP_TIMEOUT`` (10 s) per batch, on the export thread, off
every request path.

At stop the last export waited out those retries (with the collector down, Ctrl-C of ``hookyard up`` took
9.6 s, granian killing the edge's worker that "refused to gracefully stop"): :func:`stop_traces` and
:func:`stop_metrics` give the final flush ``FLUSH_AT_STOP_S``, then shut the exporter, which ends its
retries at once; what is still queued then is not exported. A healthy collector takes milliseconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from shared.logs import redact, safe_url

__all__ = (
    "FLUSH_AT_STOP_S",
    "REPEAT_AFTER_S",
    "Health",
    "MetricExporter",
    "SpanExporter",
    "stop_metrics",
    "stop_traces",
)

FLUSH_AT_STOP_S = 1.0
"""Seconds the last export at stop may take before the exporter is shut (and its retries end)."""
REPEAT_AFTER_S = 60.0
"""The failing line is said at most this often: a collector going down and up says two lines a minute at most."""

log = logging.getLogger("hookyard.tracing")

# The loggers the SDK's OTLP/HTTP exporters (and their HTTP client, given the same logger) write to.
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
)
# The batch processor's "Queue full, dropping Span." is said per span, from the thread that ended it.
_PROCESSOR_LOGGER = "opentelemetry.sdk._shared_internal"


class _SetAside(logging.Filter):
    """Drops what an exporter logs on a thread inside one of our exports, telling its :class:`Health` (the
    first message of a trouble is its cause); anything else passes."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        health: Health | None = getattr(self.local, "health", None)
        if health is None:
            return True
        health.trouble(record.getMessage())
        return False


class _OncePerMinute(logging.Filter):
    """One record of each message per ``REPEAT_AFTER_S`` (the rest counted and dropped)."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[object, float] = {}
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self.last.get(record.msg, -REPEAT_AFTER_S) < REPEAT_AFTER_S:
            self.dropped += 1
            return False
        self.last[record.msg] = now
        return True


_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")]+")
_SET_ASIDE = _SetAside()
_ONCE_PER_MINUTE = _OncePerMinute()


def _install() -> None:
    """The filters on the SDK's loggers, once per process."""
    for name in _EXPORTER_LOGGERS:
        if _SET_ASIDE not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_SET_ASIDE)
    if _ONCE_PER_MINUTE not in logging.getLogger(_PROCESSOR_LOGGER).filters:
        logging.getLogger(_PROCESSOR_LOGGER).addFilter(_ONCE_PER_MINUTE)


class Health:
    """One exporter's state, working or in trouble, said when it changes: the trouble at its first sign (the
    first retry, not the batch given up seconds later), its end at the next export that goes through."""

    def __init__(self, what: str, signal: str) -> None:
        _install()
        self.what = what
        endpoint = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        self.where = safe_url(endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""))
        self.shut = False  # the exporter's shutdown was called (stop_traces may call it before the SDK does)
        self.troubled = False  # since the last export that went through
        self.said = False  # the trouble line was said for this trouble (not within REPEAT_AFTER_S of the last)
        self.said_at: float | None = None
        self.failed = 0  # exports given up meanwhile
        self.lost = 0  # and what they held
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def exporting(self) -> Iterator[None]:
        _SET_ASIDE.local.health = self
        try:
            yield
        finally:
            _SET_ASIDE.local.health = None

    def first_shutdown(self) -> bool:
        """True the first time only: the SDK's exporter warns when shut twice."""
        with self._lock:
            shut, self.shut = self.shut, True
            return not shut

    def trouble(self, message: str) -> None:
        """What the SDK logged during an export (a retry, a batch given up): said once per trouble."""
        with self._lock:
            if self.troubled:
                return
            self.troubled = True
            now = time.monotonic()
            if self.said_at is not None and now - self.said_at < REPEAT_AFTER_S:
                return
            self.said, self.said_at = True, now
        log.warning(
            "tracing: exporting %s to %s fails (%s); one line will say when it works again (the exporter retries "
            "each batch for OTEL_EXPORTER_OTLP_TIMEOUT, then drops it)",
            self.what, self.where, _cause(message),
        )  # fmt: skip

    def result(self, ok: bool, items: int) -> None:
        if not ok:
            self.trouble("the export failed")  # without a line of the SDK's (none, as of this writing)
            with self._lock:
                self.failed += 1
                self.lost += items
            return
        with self._lock:
            said, failed, lost = self.said, self.failed, self.lost
            self.troubled, self.said, self.failed, self.lost = False, False, 0, 0
        if said:
            log.info(
                "tracing: exporting %s to %s works again (%s)",
                self.what, self.where,
                f"{failed} export(s) of {lost} {self.what} dropped meanwhile" if failed else "a retry went through",
            )  # fmt: skip


def _cause(message: str) -> str:
    """The OS's words for a connection's failure (``[Errno 111] Connection refused``) out of the HTTP client's
    paragraph, else the SDK's message, shortened and without anything that looks like a credential."""
    found = _ERRNO.search(message)
    return redact(found.group(0) if found else message[:300])


class SpanExporter(OTLPSpanExporter):
    """The SDK's span exporter, configured by the ``OTEL_*`` variables as before, with :class:`Health`."""

    def __init__(self) -> None:
        super().__init__()
        self.health = Health("spans", "traces")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.health.exporting():
            result = super().export(spans)
        self.health.result(result is SpanExportResult.SUCCESS, len(spans))
        return result

    def shutdown(self) -> None:
        if self.health.first_shutdown():
            super().shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated


class MetricExporter(OTLPMetricExporter):
    """The SDK's metric exporter, as :class:`SpanExporter` is its span exporter."""

    def __init__(self) -> None:
        super().__init__()
        self.health = Health("metrics", "metrics")

    def export(
        self, metrics_data: MetricsData, timeout_millis: float | None = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        with self.health.exporting():
            result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        self.health.result(result is MetricExportResult.SUCCESS, 1)
        return result

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        if self.health.first_shutdown():
            super().shutdown(timeout_millis=timeout_millis, **kwargs)


def stop_traces(provider: TracerProvider, exporter: SpanExporter, within_s: float = FLUSH_AT_STOP_S) -> None:
    """The provider's shutdown (what is queued goes out), given ``within_s``: then the exporter is shut, which
    ends the last export's retries. The SDK's own shutdown takes no bound (its batch processor waits up to
    30 s for its thread, which waits out the exporter's retries), so it runs on a thread of its own, a daemon
    that a request still in flight to an unanswering collector cannot keep the process alive with."""
    stopping = threading.Thread(target=provider.shutdown, name="hookyard-traces-stop", daemon=True)
    stopping.start()
    stopping.join(within_s)
    if stopping.is_alive():
        exporter.shutdown()
        stopping.join(0.2)  # the retry's wait ends at once: let the processor finish its shutdown


def stop_metrics(provider: Any, within_s: float = FLUSH_AT_STOP_S) -> None:
    """The meter provider's shutdown, bounded by the SDK's own timeout (its reader waits that long for the
    last export, then shuts the exporter)."""
    provider.shutdown(timeout_millis=within_s * 1000)
