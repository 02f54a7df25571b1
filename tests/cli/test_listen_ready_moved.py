"""``listen``'s "Ready" line names the ingest URL of the moment it is printed, even when the edge moved during
the short wait before it (which pins "now"). It named the URL read before that wait: an ``up`` back on other
ports while listen started was announced with the old ingest URL, which takes nothing.

Real processes: two control planes on the test's Postgres and Redis, the first telling the edge is at one
URL, the second at another (``HOOKYARD_PUBLIC_EDGE_URL``), as an ``up`` restarted with its edge elsewhere
would, behind a loopback TCP relay (``_Relay``) that the CLI is pointed at. The relay passes the first
control plane's answers until listen's first wait for events, drops that connection (the control plane
gone mid-wait) and passes every later one to the second."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import httpx
import pytest

from bench.ports import free_port
from shared.settings import Settings
from tests.conftest import make_account
from tests.onboarding.clirun import Proc
from tests.stack import Stack

pytestmark = pytest.mark.slow


class _Relay:
    """Loopback TCP relay: to ``first`` until a request for ``/events/wait`` passes, which it drops; then to
    ``second``."""

    def __init__(self, first: int, second: int) -> None:
        self.upstream, self.second = first, second
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
                threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
                threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if requests and self.upstream != self.second and b"/events/wait" in chunk:
                    self.upstream = self.second  # the next connection goes there; this one is dropped
                    break
                sink.sendall(chunk)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


async def test_ready_names_the_ingest_url_after_a_move_during_the_first_wait(
    settings: Settings, tmp_path: Path
) -> None:
    stack = Stack(settings, tmp_path)
    ports = {"a": free_port(), "b": free_port()}
    for name, port in ports.items():
        stack.env["HOOKYARD_PUBLIC_EDGE_URL"] = f"http://edge-{name}.example"
        stack.start(f"control-{name}", "control", "--port", str(port), port=port)
    relay = _Relay(ports["a"], ports["b"])
    account = await make_account(settings.database_url)
    listen: Proc | None = None
    try:
        made = httpx.post(
            f"http://127.0.0.1:{ports['a']}/v1/endpoints", json={"name": "moved"}, headers=account.headers
        )
        endpoint = made.json()
        assert endpoint["ingest_url"].startswith("http://edge-a.example/h/"), endpoint
        env = {**stack.env, "HOOKYARD_API_KEY": account.key, "HOOKYARD_DATA_DIR": str(tmp_path / "cli")}
        url = f"http://127.0.0.1:{relay.port}"
        args = ["listen", endpoint["id"], "--forward-to", "http://127.0.0.1:9/", "--control-url", url]
        listen = Proc(args, env, tmp_path / "listen.log")
        ready = listen.wait_for_output(r"^Ready\. Send webhooks to (\S+)").group(1)
        assert listen.interrupt() == 0
    finally:
        if listen is not None:
            listen.kill()
        relay.listener.close()
        stack.stop_all()
    assert relay.upstream == ports["b"]  # the wait was dropped: the move happened during it
    assert ready == endpoint["ingest_url"].replace("edge-a", "edge-b"), listen.output
