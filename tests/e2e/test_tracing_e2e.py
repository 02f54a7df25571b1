"""One webhook's trace end to end, through real processes (edge, worker, control) exporting to a real OTLP/HTTP
receiver (``tests.otlp``, decoding with ``opentelemetry-proto``): the sender's trace continued by the edge,
the flush batch linked to it, the routing decision, the delivery attempt with its timings and the
``traceparent`` the destination received, a replay from the control plane in the same trace, the ids in the
API and in the JSON log lines; a destination with ``propagate_trace: false`` gets the sender's header only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import make_account
from tests.destination import Destination, serving
from tests.helpers import wait_for
from tests.otlp import Received, ReceivedSpan
from tests.stack import Stack

pytestmark = pytest.mark.slow

SENDER_TRACE = "0af7651916cd43dd8448eb211c80319c"
SENDER_SPAN = "b7ad6b7169203331"
SERVER, CLIENT, CONSUMER = 2, 3, 5  # the proto enum: SPAN_KIND_SERVER, _CLIENT, _CONSUMER


def _one(spans: list[ReceivedSpan], **match: object) -> ReceivedSpan:
    found = [s for s in spans if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, [(s.service, s.name, s.attributes) for s in spans])
    return found[0]


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


async def test_one_webhooks_trace_across_edge_worker_and_control(
    otlp: Received, stack: Stack, database_url: str, destination: Destination
) -> None:
    """``otlp`` first: the receiver outlives the stack, whose processes export their last spans as they stop
    (with it gone first, each exporter's retries held the teardown 9 s)."""
    stack.env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        OTEL_BSP_SCHEDULE_DELAY="100",
        HOOKYARD_LOG_FORMAT="json",
        HOOKYARD_LOG_ACTIVITY="true",
    )
    stack.env.pop("OTEL_SERVICE_NAME", None)
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush", "deliver")
    account = await make_account(database_url)
    with serving() as quiet:
        async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers) as api:
            endpoint = (await api.post("/v1/endpoints", json={"name": "traced"})).json()
            # By name: the attempt resolves it (DNS time), as it would a destination's host.
            traced_url = destination.url.replace("127.0.0.1", "localhost")
            created = await api.post(
                f"/v1/endpoints/{endpoint['id']}/destinations", json={"url": traced_url, "forward_all": True}
            )
            assert created.status_code == 201, created.text
            assert created.json()["propagate_trace"] is True
            opted_out = await api.post(
                f"/v1/endpoints/{endpoint['id']}/destinations",
                json={"url": quiet.url, "forward_all": True, "propagate_trace": False},
            )
            assert opted_out.json()["propagate_trace"] is False
            async with httpx.AsyncClient() as provider:
                ack = await provider.post(
                    endpoint["ingest_url"],
                    content=b'{"type":"invoice.paid","id":"in_1"}',
                    headers={
                        "content-type": "application/json",
                        "pay-signature": "t=1,v1=00",
                        "traceparent": f"00-{SENDER_TRACE}-{SENDER_SPAN}-01",
                    },
                )
            assert ack.status_code == 200, ack.text
            event_id = ack.json()["id"]
            (got,) = await destination.wait_for(1)
            (plain,) = await quiet.wait_for(1)

            async def recorded() -> Any:
                event = (await api.get(f"/v1/events/{event_id}")).json()
                return event if len(event.get("deliveries") or ()) == 2 else None

            event = await wait_for(recorded)
            replayed = await api.post(f"/v1/events/{event_id}/replay", json={"url": destination.url})
            assert replayed.status_code == 200, replayed.text
            (_, again) = await destination.wait_for(2)
            (first,) = [d for d in event["deliveries"] if d["destination_id"] == created.json()["id"]]
            retried = await api.post(f"/v1/deliveries/{first['id']}/retry")
            assert retried.status_code == 202, retried.text
            (_, _, resent) = await destination.wait_for(3)

    # The sender's trace is the webhook's: every span below is in it.
    assert event["trace_id"] == SENDER_TRACE
    version, trace_id, attempt_span_id, flags = got.headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", SENDER_TRACE, "01")
    assert plain.headers["traceparent"] == f"00-{SENDER_TRACE}-{SENDER_SPAN}-01"  # its own, as captured

    def complete(r: Received) -> list[ReceivedSpan] | None:
        spans = r.in_trace(SENDER_TRACE)
        names = [s.name for s in spans]
        whole = names.count("POST") == 4 and {"POST /h/{token}", "hookyard.route", "hookyard.retry"} <= set(names)
        return spans if whole else None

    spans = otlp.wait(complete)
    assert spans, [(s.service, s.name) for s in otlp.spans]
    ingest = _one(spans, name="POST /h/{token}")
    assert (ingest.service, ingest.kind, ingest.parent_span_id) == ("hookyard-edge", SERVER, SENDER_SPAN)
    assert ingest.attributes["hookyard.event_id"] == event_id
    assert ingest.attributes["hookyard.endpoint_id"] == endpoint["id"]
    assert ingest.attributes["hookyard.provider"] == "payments"
    assert ingest.attributes["hookyard.event_type"] == "invoice.paid"
    assert ingest.attributes["http.response.status_code"] == 200

    route = _one(spans, name="hookyard.route")
    assert (route.service, route.parent_span_id) == ("hookyard-worker", ingest.span_id)
    assert route.attributes["hookyard.route.tasks"] == 2
    assert route.attributes["hookyard.route.new_event"] is True
    destination_ids = {created.json()["id"], opted_out.json()["id"]}
    ids = route.attributes["hookyard.route.destination_ids"]
    assert set(ids) == destination_ids  # type: ignore[arg-type]  # an attribute is a union; this one is a sequence
    # The batch is a trace of its own, linked to the event's ingest span, and the routing span links back.
    batch = otlp.wait(lambda r: [s for s in r.spans if s.name == "hookyard.flush" and s.span_id == route.links[0][1]])
    (batch_span,) = batch
    assert batch_span.kind == CONSUMER
    assert (SENDER_TRACE, ingest.span_id) in batch_span.links

    attempts = [s for s in spans if s.name == "POST" and s.service == "hookyard-worker"]
    assert len(attempts) == 3  # one per destination, and the retried one
    attempt = _one(attempts, span_id=attempt_span_id)
    assert (attempt.kind, attempt.parent_span_id) == (CLIENT, route.span_id)
    attributes = attempt.attributes
    assert attributes["hookyard.destination_id"] == created.json()["id"]
    assert attributes["hookyard.event_id"] == event_id
    assert attributes["hookyard.attempt"] == 1
    assert attributes["hookyard.source"] == "rule"
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.response.status_code"] == 200
    assert attributes["server.address"] == "localhost"
    assert attributes["url.full"] == traced_url.split("/", 3)[0] + "//" + traced_url.split("/", 3)[2]  # no path
    for phase in ("dns", "connect", "first_byte", "total"):
        assert isinstance(attributes[f"hookyard.time.{phase}_ms"], float), phase
    first_byte, total = attributes["hookyard.time.first_byte_ms"], attributes["hookyard.time.total_ms"]
    assert first_byte <= total  # type: ignore[operator]  # attribute values are a union; these two are floats
    assert {"dns.resolved", "connection.established", "response.first_byte"} <= set(attempt.events)
    (delivery,) = [d for d in event["deliveries"] if d["destination_id"] == created.json()["id"]]
    assert (delivery["trace_id"], delivery["span_id"]) == (SENDER_TRACE, attempt.span_id)
    assert attributes["hookyard.delivery_id"] == delivery["id"]

    replay = _one(spans, service="hookyard-control", name="POST")
    assert (replay.kind, replay.parent_span_id) == (CLIENT, ingest.span_id)
    assert replay.attributes["hookyard.source"] == "replay"
    assert replay.attributes["hookyard.delivery_id"] == replayed.json()["id"]
    assert (replayed.json()["trace_id"], replayed.json()["span_id"]) == (SENDER_TRACE, replay.span_id)
    assert again.headers["traceparent"] == f"00-{SENDER_TRACE}-{replay.span_id}-01"

    # A retry by hand is a span of the control plane in the same trace; the attempt it brought forward is its child.
    retry = _one(spans, name="hookyard.retry")
    assert (retry.service, retry.parent_span_id) == ("hookyard-control", route.span_id)
    assert retry.attributes["hookyard.delivery_id"] == delivery["id"]
    assert retry.attributes["hookyard.attempt"] == 2
    second = _one(attempts, parent_span_id=retry.span_id)
    assert second.attributes["hookyard.attempt"] == 2
    assert resent.headers["traceparent"] == f"00-{SENDER_TRACE}-{second.span_id}-01"

    # Every log line the worker wrote for this webhook carries its trace: the stored event (routing span) and
    # the delivery attempt (the attempt's span).
    lines = [line for line in _lines(stack.log_dir / "worker.log") if line.get("event_id") == event_id]
    assert lines
    assert all(line["trace_id"] == SENDER_TRACE for line in lines), lines
    stored = [line for line in lines if line["message"].startswith("event")]
    assert [line["span_id"] for line in stored] == [route.span_id]
    delivered = [
        line for line in lines if line["message"].startswith("delivery") and traced_url[:20] in line["message"]
    ]
    assert {line["span_id"] for line in delivered} <= {a.span_id for a in attempts}
