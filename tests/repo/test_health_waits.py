"""The harness's waits for a server to be healthy (``tests.stack.Stack.wait_healthy``, ``bench.infra.wait_http``)
poll through one client, so every poll after the first reuses its kept-alive connection: ``httpx.get`` made a
client per poll, whose TLS context alone cost 20-50 ms of CPU, and a control plane's start of 1-3 s cost the
test process 0.7 s (docs/adr/0043-suite-scheduling.md). A real loopback server, unhealthy for its first polls,
counts the connections. The one client loads no CA bundle either for a plain-HTTP URL (``ssl.SSLContext``'s
loading methods counted while it waits): TLS trust only for https (``control.support.client_tls``)."""

from __future__ import annotations

import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench.infra import wait_http
from shared.settings import Settings
from tests.stack import Stack

UNHEALTHY = 4
"""Polls answered 503 before the first 200."""


class _Health(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.connections = 0
        self.polls = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/healthz"


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server: _Health

    def handle(self) -> None:  # once per connection
        with self.server.lock:
            self.server.connections += 1
        super().handle()

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.polls += 1
            healthy = self.server.polls > UNHEALTHY
        self.send_response(200 if healthy else 503)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every CA loading of this process while the test runs, by method name."""
    loads: list[str] = []
    for name in ("load_verify_locations", "load_default_certs", "set_default_verify_paths"):
        original = getattr(ssl.SSLContext, name)

        def counted(self: ssl.SSLContext, *args: object, _original=original, _name=name, **kwargs: object) -> object:
            loads.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ssl.SSLContext, name, counted)
    return loads


@pytest.fixture
def health() -> Iterator[_Health]:
    server = _Health()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_stack_waits_on_one_connection(
    health: _Health, settings: Settings, tmp_path: Path, ca_loads: list[str]
) -> None:
    running = subprocess.Popen(["sleep", "60"])  # the process being waited for: alive throughout
    try:
        Stack(settings, tmp_path).wait_healthy(health.url, running)
    finally:
        running.kill()
        running.wait()
    assert (health.polls, health.connections) == (UNHEALTHY + 1, 1)
    assert ca_loads == []


def test_the_benches_wait_on_one_connection(health: _Health, ca_loads: list[str]) -> None:
    wait_http(health.url)
    assert (health.polls, health.connections) == (UNHEALTHY + 1, 1)
    assert ca_loads == []
