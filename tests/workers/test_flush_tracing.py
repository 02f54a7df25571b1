"""The flush's spans (``control.workers.flush_tracing``) with tracing on in the worker, against a real OTLP
receiver: the routing span continues the edge's context, or (an edge that does not trace) the sender's stored
``traceparent`` header, and its context goes into every task; the batch is a trace of its own that links to
its events."""

from __future__ import annotations

import dataclasses

import pytest

from control.db.context import Context
from control.workers.flush import Flush
from shared import tracing
from shared.wire import IngestRecord, encode_records
from tests.conftest import ingest_record
from tests.destination import add_destination, add_endpoint, add_rule
from tests.otlp import Received

SENDER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
EDGE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
async def traced(ctx: Context, otlp: Received, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    traces = tracing.setup("worker")
    assert traces is not None
    yield dataclasses.replace(ctx, tracing=traces)
    traces.shutdown()


async def test_routing_spans_continue_each_events_context_and_its_tasks_carry_them(
    traced: Context, otlp: Received
) -> None:
    async with traced.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
        destination_id = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/a")
        await add_rule(conn, endpoint_id, [destination_id])
    from_edge: IngestRecord = ingest_record(endpoint_id, b"{}")
    from_edge.traceparent = EDGE
    from_sender = ingest_record(endpoint_id, b"{}", headers=[(b"traceparent", SENDER.encode())])  # edge untraced
    untraced = ingest_record(endpoint_id, b"{}")
    flush = Flush(traced, consumer="c1", block_ms=5, claim_every_s=0)
    await flush.ensure_groups()
    try:
        await traced.redis.xadd(traced.keys.ingest_stream(0), {"r": encode_records([from_edge, from_sender, untraced])})
        while await flush.step():
            pass
    finally:
        await flush.close()
    async with traced.pool.acquire() as conn:
        events = {r["id"]: r["traceparent"] for r in await conn.fetch("SELECT id, traceparent FROM events")}
        tasks = {
            r["event_id"]: r["traceparent"]
            for r in await conn.fetch("SELECT event_id, traceparent FROM delivery_tasks")
        }
    spans = otlp.wait(lambda r: len(r.spans) >= 4 and r.spans)
    routes = {s.attributes["hookyard.event_id"]: s for s in spans if s.name == "hookyard.route"}
    (batch,) = [s for s in spans if s.name == "hookyard.flush"]
    assert events[from_edge.id] == EDGE  # the edge's context is the event's
    edge_route = routes[from_edge.id]
    assert (edge_route.trace_id, edge_route.parent_span_id) == (EDGE[3:35], EDGE[36:52])
    assert tasks[from_edge.id] == f"00-{edge_route.trace_id}-{edge_route.span_id}-01"
    sender_route = routes[from_sender.id]
    assert (sender_route.trace_id, sender_route.parent_span_id) == (SENDER[3:35], SENDER[36:52])
    assert events[from_sender.id] == tasks[from_sender.id] == f"00-{SENDER[3:35]}-{sender_route.span_id}-01"
    root = routes[untraced.id]
    assert root.parent_span_id == ""  # nothing to continue: the event's trace starts here
    assert events[untraced.id].startswith(f"00-{root.trace_id}-{root.span_id}-")  # flags: sampled (and random)
    assert all(s.attributes["hookyard.route.tasks"] == 1 for s in routes.values())
    assert all(s.links == [(batch.trace_id, batch.span_id)] for s in routes.values())
    assert batch.links == [(EDGE[3:35], EDGE[36:52])]  # the only event that came with a context
    assert batch.attributes["hookyard.flush.new_events"] == 3
