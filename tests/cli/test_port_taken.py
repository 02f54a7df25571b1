"""A second ``hookyard edge`` (or ``control``) started on a port another one serves is refused in one line,
exit 2 (``control.cli.ports``). granian binds with SO_REUSEPORT: the second one started beside the first,
silently, and the kernel split the connections between them (seen: two granian processes listening on one
port, each logging "Listening at"). Real processes on the test's Postgres and Redis (``tests.stack``)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.stack import Stack


@pytest.mark.parametrize(
    ("command", "variable"), [("edge", "HOOKYARD_EDGE_PORT"), ("control", "HOOKYARD_CONTROL_PORT")]
)
def test_a_second_server_on_a_served_port_is_refused(
    settings: Settings, tmp_path: Path, command: str, variable: str
) -> None:
    stack = Stack(settings, tmp_path)
    port = stack.edge_port if command == "edge" else stack.control_port
    try:
        stack.start(command, command, "--port", str(port), port=port)
        second = stack.start(f"{command}2", command, "--port", str(port))
        assert second.wait(timeout=30) == 2  # before: still running, sharing the port
        url = f"http://127.0.0.1:{port}/healthz"
        assert httpx.get(url, timeout=5, trust_env=False).status_code == 200  # the first one serves on
    finally:
        stack.stop_all()
    said = [line for line in (tmp_path / f"{command}2.log").read_text().splitlines() if line.strip()]
    assert said == [f"hookyard: {variable}: port {port} on 127.0.0.1 is in use; choose another (--port)"], said
