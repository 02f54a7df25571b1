"""OpenTelemetry traces for every process: one trace per captured webhook, from the edge to each delivery.

Configured only by the standard variables, which the SDK itself reads: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) turns tracing on, ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES``
name the service (default ``hookyard-<role>``), ``OTEL_TRACES_SAMPLER``/``OTEL_TRACES_SAMPLER_ARG`` sample,
``OTEL_BSP_*`` tune the batch export, ``OTEL_EXPORTER_OTLP_HEADERS``/``_TIMEOUT``/``_COMPRESSION`` the
requests. Spans go out over OTLP/HTTP (protobuf) by the SDK's own exporter, on its own thread; a collector's
trouble is said in two lines and never delays a stop (``shared.otel_export``). ``shared.otel_config`` checks
these variables before a server starts.

The same endpoint (or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) receives the backlog gauges as OpenTelemetry
metrics (:func:`setup_metrics`; ``control.support.backlog_metrics``), every ``OTEL_METRIC_EXPORT_INTERVAL`` ms.

Off (no endpoint, ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``), :func:`setup` returns None
without importing the SDK: no provider, exporter, thread or span exists, and the callers' hooks are a check
of that None (docs/adr/0061-one-trace-per-webhook.md). What travels between processes is the W3C
``traceparent`` text of a span (in the stream record, the event row, the delivery task), read and written
by the API's W3C propagator.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shared.otel_config import exporting

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, SpanContext

    from shared.otel_export import SpanExporter

__all__ = (
    "Tracing",
    "ids_of",
    "links_of",
    "resource_attributes",
    "setup",
    "setup_metrics",
    "stop_metrics",
    "trace_id_of",
    "trace_ids",
)


def resource_attributes(role: str) -> dict[str, str]:
    """The defaults of this process's resource; ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` win."""
    return {
        "service.name": f"hookyard-{role}",
        "service.namespace": "hookyard",
        "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
    }


def _resource(role: str) -> Any:
    from opentelemetry.sdk.resources import Resource

    detected = Resource.create({})  # the environment's attributes, and the SDK's (telemetry.sdk.*)
    given = dict(detected.attributes)
    if str(given.get("service.name", "")).startswith("unknown_service"):  # the SDK's stand-in: ours instead
        del given["service.name"]
    return Resource(resource_attributes(role)).merge(Resource(given, detected.schema_url))


class Tracing:
    """One process's tracer and the W3C propagator, with what hookyard does with them in one place."""

    def __init__(self, provider: TracerProvider, exporter: SpanExporter | None = None) -> None:
        from opentelemetry import context as context_api
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self.exporter = exporter
        self.tracer = provider.get_tracer("hookyard")
        self._propagator = TraceContextTextMapPropagator()
        self._trace = trace
        self._empty = context_api.Context()

    def context(self, traceparent: str | None, tracestate: str | None = None) -> Context:
        """The context a span continues: the one ``traceparent`` names, or none (a new trace) when it is
        absent or not valid W3C text (a sender's header is anybody's text)."""
        if not traceparent:
            return self._empty
        carrier = {"traceparent": traceparent}
        if tracestate:
            carrier["tracestate"] = tracestate
        return self._propagator.extract(carrier, context=self._empty)

    def span_context(self, traceparent: str | None) -> SpanContext | None:
        """The span ``traceparent`` names, or None when there is none (or it is not valid)."""
        found = self._trace.get_current_span(self.context(traceparent)).get_span_context()
        return found if found.is_valid else None

    def start(
        self,
        name: str,
        *,
        parent: str | Context | None = None,
        kind: str = "INTERNAL",
        attributes: Mapping[str, Any] | None = None,
        links: Iterable[SpanContext] = (),
        start_time: int | None = None,
    ) -> Span:
        """A span started now (or at ``start_time``, ns since the epoch), a child of ``parent`` (a
        ``traceparent`` text or a context; none: a new trace), linked to ``links``."""
        context = parent if parent is not None and not isinstance(parent, str) else self.context(parent)
        return self.tracer.start_span(
            name,
            context=context,
            kind=getattr(self._trace.SpanKind, kind),
            attributes=dict(attributes) if attributes else None,
            links=[self._trace.Link(link) for link in links],
            start_time=start_time,
        )

    def headers(self, span: Span) -> dict[str, str]:
        """``traceparent`` (and ``tracestate`` when the trace has one) of ``span``, as a request carries them."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=self._trace.set_span_in_context(span, self._empty))
        return carrier

    def traceparent(self, span: Span) -> str:
        """The W3C ``traceparent`` of ``span`` (sampled or not: a child must follow its parent's decision), in
        the propagator's own version-00 form, from the API's id formatters (the edge does this per request,
        and going through ``inject`` and a context for it cost 5 µs)."""
        context, trace = span.get_span_context(), self._trace
        trace_id, span_id = trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)
        return f"00-{trace_id}-{span_id}-{context.trace_flags:02x}"

    def shutdown(self) -> None:
        """Exports what is still queued and stops the export thread, within ``FLUSH_AT_STOP_S`` of
        ``shared.otel_export`` (a collector that is down never holds a process's stop)."""
        if self.exporter is None:
            self.provider.shutdown()
            return
        from shared.otel_export import stop_traces

        stop_traces(self.provider, self.exporter)


def ids_of(span: Span) -> tuple[str, str] | None:
    """(trace id, span id) in hex of a span that is recorded (sampled), else None: an id is shown only where
    the tracing backend will have it."""
    context = span.get_span_context()
    if not context.trace_flags.sampled:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a stored ``traceparent`` whose trace was sampled, else None (``00-<trace>-<span>-<flags>``,
    the format every stored value was written in by the propagator)."""
    if not traceparent or len(traceparent) < 55:
        return None
    try:
        sampled = int(traceparent[53:55], 16) & 1
    except ValueError:
        return None
    return traceparent[3:35] if sampled else None


def trace_ids(traceparent: str | None) -> dict[str, str]:
    """``trace_id`` and ``span_id`` of a sampled ``traceparent`` for a log line's ``extra=``, else nothing."""
    trace_id = trace_id_of(traceparent)
    return {"trace_id": trace_id, "span_id": traceparent[36:52]} if trace_id and traceparent else {}


def setup(role: str) -> Tracing | None:
    """This process's tracing when an OTLP endpoint is configured (see the module's docstring), else None.
    Imports the SDK only then."""
    if not exporting("traces"):
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from shared.otel_export import SpanExporter

    provider = TracerProvider(resource=_resource(role))
    exporter = SpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider, exporter)


def setup_metrics(role: str) -> Any:
    """A ``MeterProvider`` exporting to the OTLP endpoint every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (the SDK's
    reader, on its own thread), when one is configured for metrics; else None, without importing the SDK."""
    if not exporting("metrics"):
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from shared.otel_export import MetricExporter

    return MeterProvider(metric_readers=[PeriodicExportingMetricReader(MetricExporter())], resource=_resource(role))


def stop_metrics(provider: Any) -> None:
    """What :func:`setup_metrics` started, stopped within ``FLUSH_AT_STOP_S`` (``shared.otel_export``)."""
    from shared.otel_export import stop_metrics as stop

    stop(provider)


def links_of(tracing: Tracing, traceparents: Sequence[str | None]) -> list[SpanContext]:
    """The distinct valid span contexts among ``traceparents`` (a batch span links to its events)."""
    seen: dict[str, SpanContext] = {}
    for traceparent in traceparents:
        if traceparent and traceparent not in seen and (found := tracing.span_context(traceparent)) is not None:
            seen[traceparent] = found
    return list(seen.values())
