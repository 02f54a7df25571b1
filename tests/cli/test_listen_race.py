"""``hookyard listen`` says "new events from now", so an event sent as its "Ready" line appears is
forwarded, once.

The moment is made exact, not hoped for: listen's output is a pipe this test has filled, so its first line
blocks in ``write`` until the test reads. While it is blocked there (``/proc/PID/syscall`` says so), an event
is sent and stored; then the pipe is drained, and a second event follows as a sentinel. Both must reach the
destination, each once and in order. Before: "now" was the position of the first wait, which began only
after "Ready" was printed, so the first event was stored before it and never forwarded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_account
from tests.destination import Destination
from tests.onboarding.clirun import until
from tests.stack import Stack, hookyard_command

pytestmark = pytest.mark.slow


@pytest.fixture
async def cli_and_api(
    stack: Stack, database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[dict[str, str], httpx.Client]]:
    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    account = await make_account(database_url)
    env = {**stack.env, "HOOKYARD_API_KEY": account.key, "HOOKYARD_DATA_DIR": str(tmp_path / "cli")}
    with httpx.Client(base_url=stack.control_url, headers=account.headers, timeout=30) as api:
        yield env, api


def _full_pipe() -> tuple[int, int]:
    """A pipe with no room left: the next write to it blocks until the other end reads."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    page = b"." * 4096  # PIPE_BUF: written whole or not at all, so the pipe ends exactly full
    try:
        while True:
            os.write(write_end, page)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    return read_end, write_end


def _blocked_writing(pid: int, fd: int) -> bool:
    """The process sleeps in write(fd, ...)."""
    write = {"x86_64": 1, "aarch64": 64}[os.uname().machine]
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == str(write) and int(fields[1], 16) == fd


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/syscall")
def test_an_event_sent_as_ready_prints_is_forwarded_once(
    cli_and_api: tuple[dict[str, str], httpx.Client], destination: Destination
) -> None:
    env, api = cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "race"}).json()
    stored = f"/v1/endpoints/{endpoint['id']}/events"
    read_end, write_end = _full_pipe()
    listen = subprocess.Popen(
        [*hookyard_command(), "listen", endpoint["id"], "--forward-to", destination.url],
        env=env,
        stdout=write_end,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    os.close(write_end)
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.extend(iter(lambda: os.read(read_end, 65536), b"")))
    try:
        until(lambda: _blocked_writing(listen.pid, 1) or listen.poll() is not None, 30, "listen writing Ready")
        assert listen.poll() is None
        ack = httpx.post(endpoint["ingest_url"], json={"n": 1})
        assert ack.status_code == 200, ack.text
        until(lambda: api.get(stored).json()["events"], 30, "the first event stored")
        reader.start()  # "Ready" goes out now, after the event was stored
        until(lambda: b"Forwarding to" in b"".join(output), 30, "listen's Forwarding line")
        httpx.post(endpoint["ingest_url"], json={"n": 2}).raise_for_status()
        until(lambda: any(json.loads(r.body)["n"] == 2 for r in destination.requests), 30, "the sentinel")
        # listen forwards in stored order, one at a time: a duplicate of the first would precede the sentinel
        assert [json.loads(r.body)["n"] for r in destination.requests] == [1, 2]
        text = b"".join(output).lstrip(b".").decode()
        assert text.startswith(f"Ready. Send webhooks to {endpoint['ingest_url']}"), text
    finally:
        listen.kill()
        listen.wait(10)
        if reader.is_alive():
            reader.join(10)
        os.close(read_end)
