"""The edge's ingest span: one per request to ``/h/...``, when tracing is on (``shared.tracing``).

The span is the first of the webhook's trace, a child of the sender's own ``traceparent`` when it sends one
(its ``tracestate`` kept). It follows the HTTP server conventions (``http.request.method``, ``http.route``,
``url.path`` as the route: the ingest token is a credential and the sub-path may carry one, so neither is
exported; ``server.address``, ``client.address``, ``http.response.status_code``) and carries the event's
``hookyard.*`` ids, provider and event type. Its ``traceparent`` goes into the stream record, and so with
the event to the flush, the deliveries and any replay.

Only :class:`TracedIngest` exists when tracing is on, chosen at startup: it wraps the ingest handler and
replaces the handler's stream write (``Ingest.store``) by one that first gives the record the span's context
and attributes, the span found in a context variable it set for the request. The handler holds no tracing
code, so an edge without tracing creates no span, imports no SDK and checks nothing per request
(docs/adr/0061-one-trace-per-webhook.md, docs/adr/0063-edge-ratios-side-by-side.md).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import msgspec

from shared.logs import log_context
from shared.tracing import Tracing, ids_of
from shared.wire import IngestRecord

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from opentelemetry.util.types import AttributeValue

__all__ = ("TracedIngest",)

_SPAN: ContextVar[Span | None] = ContextVar("hookyard_ingest_span", default=None)
"""The request's span, from the wrapper to the stream write it swapped in (the same task runs both)."""
_ROUTE = "/h/{token}"
_error = msgspec.json.Decoder(dict[str, dict[str, object]])


class TracedIngest:
    """Wraps the ingest handler: starts the span, fills it in as the record is written (:meth:`_store`, the
    handler's ``store``), ends it with the answer's status."""

    def __init__(self, ingest: Any, tracing: Tracing) -> None:
        from opentelemetry.trace import SpanKind, StatusCode

        self.ingest = ingest
        self.tracing = tracing
        self._server, self._error = SpanKind.SERVER, StatusCode.ERROR
        self._append = ingest.store
        ingest.store = self._store  # the handler's one hook, set once here

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = scope["headers"]
        traceparent = tracestate = None
        for name, value in headers:
            if name == b"traceparent":
                traceparent = value.decode("latin-1")
            elif name == b"tracestate":
                tracestate = value.decode("latin-1")
        method = scope["method"]
        tracing = self.tracing
        span = tracing.tracer.start_span(
            f"{method} {_ROUTE}", context=tracing.context(traceparent, tracestate), kind=self._server
        )
        token = _SPAN.set(span)
        try:
            if not span.is_recording():  # sampled out: only its context travels (the record gets it)
                await self.ingest(scope, receive, send)
                return
            await self._recording(span, scope, receive, send, headers, method)
        finally:
            _SPAN.reset(token)

    async def _recording(
        self, span: Span, scope: dict[str, Any], receive: Any, send: Any, headers: Any, method: str
    ) -> None:
        span.set_attributes(_request_attributes(scope, headers, method))
        answered: list[int] = []
        refusal: list[bytes] = []

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answered.append(message["status"])
            elif answered and answered[0] >= 300 and not refusal:
                refusal.append(message.get("body", b""))
            await send(message)

        ids = ids_of(span)
        try:
            with log_context(trace_id=ids[0] if ids else None, span_id=ids[1] if ids else None):
                await self.ingest(scope, receive, sending)
        finally:
            if answered:
                span.set_attribute("http.response.status_code", answered[0])
                if answered[0] >= 500:
                    span.set_attribute("error.type", str(answered[0]))
                    span.set_status(self._error, f"answered {answered[0]}")
                if refusal:
                    code = _code(refusal[0])
                    if code:
                        span.set_attribute("hookyard.refusal", code)
            span.end()

    async def _store(self, shard: int, record: IngestRecord) -> None:
        """The handler's stream write when tracing is on: the record first gets the request's span."""
        span = _SPAN.get()
        if span is not None:
            self.recorded(span, record)
        await self._append(shard, record)

    def recorded(self, span: Span, record: IngestRecord) -> None:
        """Once the request is a record: the span gets the event's attributes, and the record the span's
        ``traceparent`` (the event's trace)."""
        record.traceparent = self.tracing.traceparent(span)
        if span.is_recording():
            attributes: dict[str, AttributeValue] = {
                "hookyard.event_id": record.id,
                "hookyard.endpoint_id": record.endpoint_id,
                "http.request.body.size": len(record.body),
            }
            if record.provider is not None:
                attributes["hookyard.provider"] = record.provider
            if record.event_type is not None:
                attributes["hookyard.event_type"] = record.event_type
            if record.signature_valid is not None:
                attributes["hookyard.signature_valid"] = record.signature_valid
            if record.signature_failure_reason is not None:
                attributes["hookyard.signature_failure_reason"] = record.signature_failure_reason
            span.set_attributes(attributes)


def _request_attributes(scope: dict[str, Any], headers: list[tuple[bytes, bytes]], method: str) -> dict[str, Any]:
    """The HTTP server conventions' attributes of a sampled request (a sampled-out one builds none)."""
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "http.route": _ROUTE,
        "url.path": _ROUTE,
        "url.scheme": scope.get("scheme", "http"),
    }
    host = agent = None
    for name, value in headers:
        if name == b"host":
            host = value.decode("latin-1")
        elif name == b"user-agent":
            agent = value.decode("latin-1")
    server = scope.get("server")
    if host:
        address, _, port = host.rpartition(":") if host.rsplit(":", 1)[-1].isdigit() else (host, "", "")
        attributes["server.address"] = address.strip("[]")
        if port:
            attributes["server.port"] = int(port)
    elif server:
        attributes["server.address"], attributes["server.port"] = server[0], server[1]
    client = scope.get("client")
    if client:
        attributes["client.address"] = client[0]
    if agent:
        attributes["user_agent.original"] = agent
    return attributes


def _code(body: bytes) -> str | None:
    """The ``error.code`` of the envelope the edge answered with (every non-2xx is one)."""
    try:
        code = _error.decode(body).get("error", {}).get("code")
    except msgspec.DecodeError:
        return None
    return code if isinstance(code, str) else None
