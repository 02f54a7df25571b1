"""Tracing as a user of the ``hookyard`` command meets it: a bad ``OTEL_*`` value is one line before anything
starts (it was two ExceptionGroup tracebacks from granian's worker, after ``up`` had started and migrated its
databases), a server says where its spans go, and a collector that is down is two lines at most and never
holds a stop (each retry was a WARNING, and the edge's worker was killed by granian after 10 s)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from bench.ports import free_port
from control.cli.local_key import LocalKey
from shared.settings import Settings
from tests.onboarding.clirun import cli
from tests.stack import Stack


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No database, no Redis: a command that got past its settings would fail on those, or start them."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HOOKYARD_", "OTEL_")) and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {**env, "HOOKYARD_DATA_DIR": str(tmp_path / "d"), **extra}


@pytest.mark.parametrize("command", [["edge"], ["control"], ["worker"], ["up", "--edge-port", "0"]])
def test_a_bad_otel_setting_is_one_line_before_anything_starts(command: list[str], tmp_path: Path) -> None:
    """The trial's setting: OTLP over gRPC, which hookyard does not send."""
    if command[0] == "up":
        command = ["up", "--edge-port", str(free_port()), "--control-port", str(free_port())]
    env = _env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4873", OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    done = cli(env, *command)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "hookyard: OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported; hookyard sends OTLP over HTTP: "
        "http/protobuf (a collector's OTLP/HTTP receiver, port 4318 by default)\n"
    )
    assert not (tmp_path / "d").exists()  # up started no database


def test_ups_banner_says_where_spans_go_and_not_the_headers(tmp_path: Path) -> None:
    from control.cli.up import _banner
    from shared.otel_config import describe

    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "x-key=s3cret"}
    settings = Settings()
    key = LocalKey(value="hy_x", new=False, restored=None, set_aside=None)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        _banner(settings, tmp_path, key, describe(env))
    lines = out.getvalue().splitlines()
    assert lines[-2] == (
        "  tracing  spans to http://127.0.0.1:4318 (sampler parentbased_always_on) with the headers set (not shown), "
        "backlog metrics to http://127.0.0.1:4318 every 60s with the headers set (not shown) over OTLP/HTTP"
    )
    assert "s3cret" not in out.getvalue()


def test_an_edge_with_its_collector_down_says_so_once_and_stops_at_once(settings: Settings, tmp_path: Path) -> None:
    collector = free_port()  # nobody listens there
    stack = Stack(
        settings,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector}",
        OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer s3cret-token",
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    try:
        edge = stack.start_edge()
        with httpx.Client(trust_env=False) as client:
            for n in range(60):  # a span each (a refusal: no such endpoint)
                client.post(f"{edge}/h/hk_nope{n}", content=b"{}")
                time.sleep(0.05)  # batches of a few spans: many exports, each failing with its retries
        time.sleep(1.0)
        proc = stack.procs.pop("edge")
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        took = time.monotonic() - started
    finally:
        stack.stop_all()
    log = (tmp_path / "edge.log").read_text()
    assert (
        f"edge: tracing: spans to http://127.0.0.1:{collector} (sampler parentbased_always_on) with the headers set "
        "(not shown) over OTLP/HTTP\n" in log
    ), log
    assert "s3cret-token" not in log
    exporting = [line for line in log.splitlines() if "export" in line.lower()]
    assert len(exporting) == 1, exporting
    assert (
        f"tracing: exporting spans to http://127.0.0.1:{collector} fails ([Errno 111] Connection refused)"
        in (exporting[0])
    )
    assert "Traceback" not in log
    assert took < 4.0, (took, log)
