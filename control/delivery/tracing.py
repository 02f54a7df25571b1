"""The span of one outbound request (a delivery attempt, a replay, a destination test), when tracing is on.

A client span by the OpenTelemetry HTTP conventions (named by the method; ``http.request.method``,
``url.full``, ``url.scheme``, ``server.address``, ``server.port``, ``http.response.status_code``,
``error.type``), a child of the event's trace (``control.workers.flush_tracing`` says which span), with the
``hookyard.*`` ids and attempt number, and the exchange's moments from the transport
(``transport.timings``): ``hookyard.time.dns_ms``, ``.connect_ms``, ``.tls_ms``, ``.first_byte_ms`` and
``.total_ms``, ``hookyard.connection.reused``, and an event at each moment. A request that got no answer
(refused egress, a timeout, a dropped connection) ends the span as an error with its message.

``url.full`` is the URL as logs name it (``shared.logs.safe_url``: scheme, host, port): a destination URL's
user info, path and query are where its secrets live, and a span is exported to a third party's collector.

Propagation out: :meth:`SendSpan.propagate` puts the W3C ``traceparent`` (and ``tracestate``) of this span into
the request, so the destination's own tracing continues the webhook's trace; a destination turns it off with
``propagate_trace: false``. Without tracing nothing here runs (``Context.tracing`` is None).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from control.db.leased import LeasedTask
from control.delivery.transport.timings import TIMINGS, Timings
from shared.logs import safe_url
from shared.tracing import Tracing, ids_of

if TYPE_CHECKING:
    from control.delivery.send import Outcome

__all__ = ("PROPAGATED", "SendSpan", "attempt_span")

PROPAGATED = ("traceparent", "tracestate")
"""The headers propagation sets (a captured request's own are replaced, or dropped when this span has none)."""
_MOMENTS = (("resolved", "dns.resolved"), ("connected", "connection.established"), ("tls", "tls.established"))


def _server(url: str) -> dict[str, Any]:
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        return {"url.full": safe_url(url)}
    out: dict[str, Any] = {"url.full": safe_url(url), "url.scheme": scheme, "server.port": port}
    if parts.hostname:
        out["server.address"] = parts.hostname
    return out


class SendSpan:
    """Started before the request is built (its ``traceparent`` goes into it), finished with its outcome."""

    def __init__(
        self,
        tracing: Tracing,
        *,
        parent: str | None,
        method: str,
        url: str,
        attributes: Mapping[str, Any],
    ) -> None:
        self.tracing = tracing
        self.span = tracing.start(
            method.upper(),
            parent=parent,
            kind="CLIENT",
            attributes={"http.request.method": method.upper(), **_server(url), **attributes},
        )
        self.ids = ids_of(self.span)
        """(trace id, span id) when the span is recorded (sampled): stored with the delivery, logged."""
        self.started_ns = time.time_ns()
        self._timings: Timings | None = None
        self._token: Any = None

    def propagate(self, headers: dict[str, str]) -> None:
        """Puts this span's context into ``headers`` (the request's, names lowercased), replacing a captured one."""
        for name in PROPAGATED:
            headers.pop(name, None)
        headers.update(self.tracing.headers(self.span))

    def sending(self, url: str | None = None) -> None:
        """The request goes out now (to ``url`` when a transform changed it): its moments are timed."""
        if url is not None:
            self.span.set_attributes(_server(url))
        self._timings = Timings()
        self._token = TIMINGS.set(self._timings)

    def finish(
        self, outcome: Outcome, *, delivery_id: str | None = None, transform: str | None = None
    ) -> tuple[str, str] | None:
        """Ends the span with ``outcome``, the delivery record's id and what a transform did (``skipped``
        and ``failed`` sent nothing); returns :attr:`ids`."""
        from opentelemetry.trace import StatusCode

        ended = time.perf_counter()
        if self._token is not None:
            TIMINGS.reset(self._token)
            self._token = None
        span = self.span
        if span.is_recording():
            timings = self._timings
            if timings is not None:
                span.set_attributes(
                    {f"hookyard.time.{name}_ms": value for name, value in timings.durations_ms(ended).items()}
                )
                span.set_attribute("hookyard.connection.reused", timings.reused)
                for slot, name in (*_MOMENTS, ("first_byte", "response.first_byte")):
                    at = getattr(timings, slot)
                    if at:
                        span.add_event(name, timestamp=self.started_ns + int((at - timings.started) * 1e9))
            if delivery_id is not None:
                span.set_attribute("hookyard.delivery_id", delivery_id)
            if transform is not None:
                span.set_attribute("hookyard.transform", transform)
            if outcome.status is not None:
                span.set_attribute("http.response.status_code", outcome.status)
                if outcome.status >= 400:
                    span.set_attribute("error.type", str(outcome.status))
                    span.set_status(StatusCode.ERROR, f"HTTP {outcome.status}")
            elif transform != "skipped":
                reason = outcome.error or "not sent"
                span.set_attribute("error.type", "transform" if transform == "failed" else _error_type(reason))
                span.set_status(StatusCode.ERROR, reason[:300])
        span.end()
        return self.ids


def _error_type(reason: str) -> str:
    """A low-cardinality name of why no response came back (the message itself is the span's status)."""
    lowered = reason.lower()
    for prefix, kind in (
        ("egress refused", "egress_refused"),
        ("timeout", "timeout"),
        ("connection failed", "connection_failed"),
        ("invalid request", "invalid_request"),
        ("request not sendable", "invalid_request"),
        ("event", "not_sendable"),
    ):
        if lowered.startswith(prefix):
            return kind
    return "_OTHER"


def attempt_span(tracing: Tracing, task: LeasedTask) -> SendSpan:
    """The span of a rule delivery's attempt of a leased task (``control.db.leased.LeasedTask``): a child of
    the routing span that made the task (or of the retry by hand that brought it forward)."""
    attributes: dict[str, Any] = {
        "hookyard.source": "rule",
        "hookyard.event_id": task.event_id,
        "hookyard.endpoint_id": task.endpoint_id,
        "hookyard.destination_id": task.destination_id,
        "hookyard.rule_id": task.rule_id,
        "hookyard.task_id": task.id,
        "hookyard.attempt": task.attempts,
    }
    if task.provider is not None:
        attributes["hookyard.provider"] = task.provider
    if task.event_type is not None:
        attributes["hookyard.event_type"] = task.event_type
    method = task.method or "POST"
    return SendSpan(tracing, parent=task.traceparent, method=method, url=task.destination_url, attributes=attributes)
