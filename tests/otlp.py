"""A real OTLP/HTTP receiver for the tests: a small HTTP server on loopback that takes what the SDK's own
exporters send (``POST /v1/traces``, ``POST /v1/metrics``, protobuf, gzip or not) and decodes it with
``opentelemetry-proto``, as a collector would. Tests point ``OTEL_EXPORTER_OTLP_ENDPOINT`` at it."""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ("Received", "ReceivedSpan", "otlp", "receiver")


def _value(any_value: Any) -> object:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, object]:
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, object]
    links: list[tuple[str, str]]
    events: list[str]
    status_code: int
    start_ns: int
    end_ns: int


@dataclass
class Received:
    """What the receiver got so far; ``wait`` polls it with a deadline."""

    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: list[tuple[str, str, dict[str, object], float]] = field(default_factory=list)
    """(service, metric name, data point attributes, value) of every gauge or sum data point."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, what: Callable[[Received], Any], timeout_s: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                found = what(self)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def in_trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.trace_id == trace_id]


class _Handler(BaseHTTPRequestHandler):
    received: Received

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("content-length", "0")))
        encoding = (self.headers.get("content-encoding") or "").lower()
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "deflate":
            data = zlib.decompress(data)
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(data)
            self._spans(request)
            answer = ExportTraceServiceResponse().SerializeToString()
        elif self.path == "/v1/metrics":
            request = ExportMetricsServiceRequest.FromString(data)
            self._metrics(request)
            answer = ExportMetricsServiceResponse().SerializeToString()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def _spans(self, request: ExportTraceServiceRequest) -> None:
        out = []
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get("service.name"))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    out.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            events=[event.name for event in span.events],
                            status_code=span.status.code,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self.received.lock:
            self.received.spans.extend(out)

    def _metrics(self, request: ExportMetricsServiceRequest) -> None:
        out = []
        for resource_metrics in request.resource_metrics:
            service = str(_attributes(resource_metrics.resource.attributes).get("service.name"))
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data")
                    if kind not in ("gauge", "sum"):
                        continue
                    for point in getattr(metric, kind).data_points:
                        value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
                        out.append((service, metric.name, _attributes(point.attributes), float(value)))
        with self.received.lock:
            self.received.metrics.extend(out)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def otlp() -> Iterator[Received]:
    """A receiver on a free loopback port for this test."""
    with receiver() as received:
        yield received


@contextlib.contextmanager
def receiver(port: int = 0) -> Iterator[Received]:
    """A receiver on ``port`` of loopback (0: a free one), for as long as the block runs: a collector that
    comes up where an exporter was already failing."""
    handler = type("Handler", (_Handler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    received = Received(url=f"http://127.0.0.1:{server.server_address[1]}")
    handler.received = received
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
