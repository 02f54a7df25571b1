"""The flush's spans, when tracing is on: one span per batch, linked to the events it stored, and one routing
span per event, in the event's own trace.

A batch serves many events, each of its own trace, so its span (``hookyard.flush``, kind CONSUMER) is a trace
of its own with a link to each event's ingest span (the SDK keeps the first 128, ``OTEL_LINK_COUNT_LIMIT``).
Each event gets a span of its trace for its routing decision (``hookyard.route``, a child of the ingest span,
linked back to the batch): which rules matched, which destinations got a task, whether the event was new or
already stored (a re-processed stream entry). Its ``traceparent`` goes into every task it made, so each
delivery attempt is a child of the decision that caused it.

An edge that does not trace leaves the record without a context: the routing span then continues the
sender's own ``traceparent`` header if it sent one (it is stored with the event anyway), or starts the
event's trace, and the event stores its context instead of the ingest span's. Without tracing none of this
module runs: the flush's hooks check ``Context.tracing`` (docs/adr/0061-one-trace-per-webhook.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from control.records.storable import EventRow
from shared.tracing import Tracing, ids_of, links_of
from shared.wire import IngestRecord

__all__ = ("BatchSpan", "RoutingSpans")

_NO_KEYS = (None, None, None)
"""The shaping keys of a task of a batch without shaping (``control.routing.route``: four-column tasks)."""


class BatchSpan:
    """The span of one flushed batch, from its read to its acknowledgement (across retries of the step)."""

    def __init__(self, tracing: Tracing, records: Sequence[IngestRecord], entries: int) -> None:
        self.tracing = tracing
        self.span = tracing.start(
            "hookyard.flush",
            kind="CONSUMER",
            attributes={"hookyard.flush.entries": entries, "hookyard.flush.records": len(records)},
            links=links_of(tracing, [r.traceparent for r in records]),
        )

    def end(self, *, stored: int, new: int, dead: int) -> None:
        self.span.set_attributes(
            {"hookyard.flush.stored": stored, "hookyard.flush.new_events": new, "hookyard.flush.dead_letters": dead}
        )
        self.span.end()


class RoutingSpans:
    """The routing spans of one insert attempt of a batch (an attempt that fails ends them as failed)."""

    def __init__(self, tracing: Tracing, batch: BatchSpan | None) -> None:
        self.tracing = tracing
        self.batch = batch
        self.started = time.time_ns()
        self.spans: dict[str, Any] = {}
        """Event id → its routing span."""

    def routed(
        self, rows: Sequence[EventRow], tasks: Sequence[tuple[Any, ...]]
    ) -> tuple[list[EventRow], list[tuple[Any, ...]]]:
        """The rows with each event's context (the edge's, or its routing span's when it had none) and the
        tasks with their routing span's ``traceparent`` (eight columns, ``control.db.flush.TASK_COLUMNS``)."""
        tracing = self.tracing
        by_event: dict[str, list[tuple[Any, ...]]] = {}
        for task in tasks:
            by_event.setdefault(task[1], []).append(task)
        link = [self.batch.span.get_span_context()] if self.batch is not None else []
        out_rows: list[EventRow] = []
        out_tasks: list[tuple[Any, ...]] = []
        for row in rows:
            event_id = row.id
            edge = row.traceparent
            parent = edge or (row.headers or {}).get("traceparent")
            made = by_event.get(event_id, ())
            attributes: dict[str, Any] = {
                "hookyard.event_id": event_id,
                "hookyard.endpoint_id": row.endpoint_id,
                "hookyard.route.tasks": len(made),
            }
            if row.provider is not None:
                attributes["hookyard.provider"] = row.provider
            if row.event_type is not None:
                attributes["hookyard.event_type"] = row.event_type
            if made:
                attributes["hookyard.route.destination_ids"] = sorted({t[3] for t in made})
                attributes["hookyard.route.rule_ids"] = sorted({t[2] for t in made})
            span = tracing.start(
                "hookyard.route", parent=parent, attributes=attributes, links=link, start_time=self.started
            )
            self.spans[event_id] = span
            context = tracing.traceparent(span)
            out_rows.append(row if edge else row._replace(traceparent=context))
            for task in made:
                out_tasks.append((*task[:4], *(task[4:7] or _NO_KEYS), context))
        return out_rows, out_tasks

    def committed(self, new_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Ends the spans of a committed insert; (trace id, span id) of each new event's recorded span."""
        new = set(new_ids)
        ids: dict[str, tuple[str, str]] = {}
        for event_id, span in self.spans.items():
            fresh = event_id in new
            span.set_attribute("hookyard.route.new_event", fresh)
            span.end()
            if fresh and (found := ids_of(span)) is not None:
                ids[event_id] = found
        self.spans.clear()
        return ids

    def failed(self, error: BaseException) -> None:
        """Ends the spans of an insert that did not commit (retried, or split to find a refused record)."""
        from opentelemetry.trace import StatusCode

        for span in self.spans.values():
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(StatusCode.ERROR, str(error)[:200])
            span.end()
        self.spans.clear()
