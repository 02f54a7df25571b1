"""A collector that is down, with the SDK's own exporter (``shared.otel_export``), in this process against a
real port: one line when exports start failing and one when they work again, however many retries and
batches fail in between (the SDK said a WARNING per retry and an ERROR per batch given up); and a stop that
a dead collector does not hold (the last flush waited out the exporter's retries, up to 10 s)."""

from __future__ import annotations

import logging
import time

import pytest

from bench.ports import free_port
from shared import tracing
from tests.otlp import receiver


def _flush_one(traces: tracing.Tracing, name: str) -> None:
    traces.start(name).end()
    traces.provider.force_flush()  # one export, on this thread, retries and all


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{r.name} {r.levelname} {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith(("opentelemetry", "hookyard.tracing")) and r.levelno >= logging.INFO
    ]


def test_a_collector_down_then_up_is_two_lines(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1.5")  # a retry or two per batch, then given up
    caplog.set_level(logging.INFO)
    traces = tracing.setup("worker")
    assert traces is not None
    try:
        for n in range(3):
            _flush_one(traces, f"down-{n}")
        down = _lines(caplog)
        assert len(down) == 1, down
        assert down[0].startswith(f"hookyard.tracing WARNING tracing: exporting spans to http://127.0.0.1:{port} fails")
        assert "fails ([Errno 111] Connection refused); " in down[0], down[0]
        with receiver(port) as received:
            _flush_one(traces, "up")
            assert [s.name for s in received.spans] == ["up"]
            _flush_one(traces, "up again")
        lines = _lines(caplog)
        assert len(lines) == 2, lines
        assert lines[1] == (
            f"hookyard.tracing INFO tracing: exporting spans to http://127.0.0.1:{port} works again (3 export(s) of "
            "3 spans dropped meanwhile)"
        )
    finally:
        traces.shutdown()


def test_a_dead_collector_does_not_hold_the_stop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's default timeout (10 s of retries per batch); spans queued at stop."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # nothing exported before the stop's flush
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TIMEOUT", raising=False)
    caplog.set_level(logging.INFO)
    traces = tracing.setup("edge")
    assert traces is not None
    for n in range(200):
        traces.start(f"queued-{n}").end()
    started = time.monotonic()
    traces.shutdown()
    took = time.monotonic() - started
    assert took < 1.6, took  # FLUSH_AT_STOP_S and the processor's own end
    assert len(_lines(caplog)) <= 1, _lines(caplog)
