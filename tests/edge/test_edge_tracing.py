"""The edge's ingest span (``edge.tracing``) in process against the test Redis and a real OTLP receiver: a
child of the sender's ``traceparent``, its attributes, the record carrying its context; and with tracing off,
no SDK, thread or span at all (in a fresh process, where nothing else imported the SDK)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

from edge.ingest import Ingest
from edge.tracing import TracedIngest
from shared.settings import Settings
from tests.edge.test_edge_ingest import http, put_endpoint, started_edge, stored
from tests.helpers import redis_connection  # noqa: F401 - the `redis` fixture
from tests.otlp import Received

SENDER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SENDER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch, otlp: Received) -> Received:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    return otlp


async def test_the_ingest_span_continues_the_senders_trace_and_travels_in_the_record(
    traced: Received, edge_settings: Settings, redis
) -> None:
    token = await put_endpoint(redis, edge_settings)
    async with started_edge(edge_settings) as app:
        assert isinstance(app.ingest, TracedIngest)
        async with http(app) as client:
            answer = await client.post(
                f"/h/{token}/stripe",
                content=b'{"type":"invoice.paid","id":"evt_x"}',
                headers={
                    "traceparent": f"00-{SENDER_TRACE}-{SENDER_SPAN}-01",
                    "tracestate": "vendor=1",
                    "stripe-signature": "t=1,v1=00",
                    "user-agent": "tests",
                },
            )
            refused = await client.post("/h/no-such-token", content=b"{}")
    assert answer.status_code == 200, answer.text
    assert refused.status_code == 404
    (record,) = await stored(redis, edge_settings)
    assert record.traceparent is not None
    version, trace_id, span_id, flags = record.traceparent.split("-")
    assert (version, trace_id, flags) == ("00", SENDER_TRACE, "01")
    spans = traced.wait(lambda r: len(r.spans) >= 2 and r.spans)
    by_id = {s.span_id: s for s in spans}
    ingest = by_id[span_id]
    assert ingest.service == "hookyard-edge"
    assert ingest.name == "POST /h/{token}"
    assert ingest.kind == 2  # SERVER
    assert (ingest.trace_id, ingest.parent_span_id) == (SENDER_TRACE, SENDER_SPAN)
    attributes = ingest.attributes
    assert attributes["hookyard.event_id"] == answer.json()["id"] == record.id
    assert attributes["hookyard.endpoint_id"] == record.endpoint_id
    assert attributes["hookyard.provider"] == "payments"
    assert attributes["hookyard.event_type"] == "invoice.paid"
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.route"] == attributes["url.path"] == "/h/{token}"  # never the token itself
    assert attributes["http.response.status_code"] == 200
    assert attributes["server.address"] == "edge.test"
    assert attributes["client.address"] == "127.0.0.1"
    assert attributes["user_agent.original"] == "tests"
    assert token not in json.dumps([s.attributes for s in spans])
    (other,) = [s for s in spans if s.span_id != span_id]
    assert other.trace_id != SENDER_TRACE
    assert other.parent_span_id == ""
    assert other.attributes["http.response.status_code"] == 404
    assert other.attributes["hookyard.refusal"] == "endpoint_not_found"


async def test_an_invalid_sender_traceparent_starts_a_trace_of_its_own(
    traced: Received, edge_settings: Settings, redis
) -> None:
    token = await put_endpoint(redis, edge_settings)
    async with started_edge(edge_settings) as app, http(app) as client:
        answer = await client.post(f"/h/{token}", content=b"{}", headers={"traceparent": "00-zz-\x01-01"})
    assert answer.status_code == 200
    (record,) = await stored(redis, edge_settings)
    assert record.traceparent is not None
    assert "zz" not in record.traceparent
    (span,) = traced.wait(lambda r: r.spans)
    assert span.parent_span_id == ""
    assert record.traceparent.split("-")[1] == span.trace_id


async def test_sampled_out_requests_carry_their_context_unsampled(
    traced: Received, edge_settings: Settings, redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    token = await put_endpoint(redis, edge_settings)
    async with started_edge(edge_settings) as app, http(app) as client:
        assert (await client.post(f"/h/{token}", content=b"{}")).status_code == 200
    (record,) = await stored(redis, edge_settings)
    assert record.traceparent is not None
    assert int(record.traceparent.rsplit("-", 1)[1], 16) & 1 == 0  # not sampled: the deliveries follow


async def test_without_an_endpoint_the_edge_has_no_tracing(edge_settings: Settings, redis) -> None:
    token = await put_endpoint(redis, edge_settings)
    async with started_edge(edge_settings) as app, http(app) as client:
        assert app.tracing is None
        assert type(app.ingest) is Ingest
        assert app.ingest.store == app.ingest.writer.append  # the stream write itself, nothing in between
        assert (await client.post(f"/h/{token}", content=b"{}")).status_code == 200
    (record,) = await stored(redis, edge_settings)
    assert record.traceparent is None


async def test_an_edge_without_tracing_imports_no_sdk_and_starts_no_thread(edge_settings: Settings, redis) -> None:
    """In a fresh interpreter (the test process has the SDK loaded by other tests): the edge starts, takes a
    request, and has neither the SDK's tracing nor its exporter loaded, nor a thread beyond its own."""
    token = await put_endpoint(redis, edge_settings)
    script = textwrap.dedent(
        f"""
        import asyncio, sys, threading
        import httpx
        from edge.app import create_app
        from shared.settings import load_settings

        async def main():
            app = create_app(load_settings({{}}, redis_url={edge_settings.redis_url!r},
                                           redis_prefix={edge_settings.redis_prefix!r}))
            threads = set(threading.enumerate())
            await app.startup()
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://e") as c:
                status = (await c.post("/h/{token}", content=b"{{}}")).status_code
            new = [t.name for t in set(threading.enumerate()) - threads]
            await app.shutdown()
            loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk.trace",
                                                                    "opentelemetry.exporter")))
            print(status, loaded, new)

        asyncio.run(main())
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["200", "[]", "[]"], out.stdout
    (record,) = await stored(redis, edge_settings)
    assert record.traceparent is None
