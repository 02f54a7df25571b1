"""Ctrl-C on ``hookyard up`` stops it at once, answering what waits instead of dropping it.

A real ``hookyard up`` on free ports, once on the machine's Postgres and Redis and once on embedded ones,
with everything that parks a request on the control plane open at once: a ``hookyard listen`` (in another
terminal: a session of its own), a plain long poll, a long poll with a position (``after``) and the inbox
page's event stream. Ctrl-C goes to ``up``'s process group, as a terminal sends it. ``up`` must be gone
within 3 s with nothing killed; the long polls answered 204 (the positioned one with its cursor), the stream
ended cleanly, ``listen`` carried on (it says it cannot reach the control plane) and stops cleanly on its own
Ctrl-C; nothing is left in ``up``'s temporary directory and the data dir's record is gone.

Before: granian waits for every request in flight before the app's lifespan shutdown runs, so each parked
request held the control plane until ``up`` killed it 10 s later, dropping the connections.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Servers
from tests.destination import Destination
from tests.onboarding.clirun import Proc, Up, clean_env, until
from tests.stack import free_port

pytestmark = pytest.mark.slow

STOP_S = 3.0


@pytest.fixture
def workdir() -> Iterator[Path]:
    """Outside pytest's temp root (an embedded Postgres must keep reaching its files: see tests/test_cli.py)."""
    path = Path(tempfile.mkdtemp(prefix="hookyard-shutdown-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["given", "embedded"])
def environment(request: pytest.FixtureRequest, workdir: Path) -> dict[str, str]:
    """``given``: the machine's servers (a fresh database and key prefix); ``embedded``: none set."""
    tmp = workdir / "tmp"
    tmp.mkdir()
    env = clean_env(TMPDIR=str(tmp))
    if request.param == "given":
        servers: Servers = request.getfixturevalue("servers")
        env.update(
            DATABASE_URL=request.getfixturevalue("database_url"),
            REDIS_URL=servers.redis_url,
            HOOKYARD_REDIS_PREFIX=request.getfixturevalue("redis_prefix"),
        )
    return env


class Parked:
    """Requests that park on the control plane, each in a thread of its own, with what they ended with."""

    def __init__(self, up: Up, endpoint_id: str) -> None:
        self.up, self.endpoint_id = up, endpoint_id
        self.headers = {"authorization": f"Bearer {up.key}"}
        self.pool = ThreadPoolExecutor(3)
        self.stream_lines: list[str] = []

    def _get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(
            f"{self.up.control_url}/v1/endpoints/{self.endpoint_id}/{path}",
            params=params,
            headers=self.headers,
            timeout=60,
            trust_env=False,
        )

    def _stream(self) -> bool:
        """True once the stream ended as a server ends one (its last chunk sent); raises if it was cut."""
        url = f"{self.up.control_url}/inbox/{self.endpoint_id}/stream"
        with httpx.stream("GET", url, headers=self.headers, timeout=60, trust_env=False) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                self.stream_lines.append(line)
        return True

    def open(self) -> tuple[Future[httpx.Response], Future[httpx.Response], Future[bool]]:
        return (
            self.pool.submit(self._get, "events/wait", timeout=50),
            self.pool.submit(self._get, "events/wait", timeout=50, after="now"),
            self.pool.submit(self._stream),
        )


def _waiters(metrics_port: int) -> float:
    """From control's operator port (``HOOKYARD_CONTROL_METRICS_PORT``): the API port serves no /metrics."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5, trust_env=False).text
    found = re.search(r"^hookyard_wait_waiters (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_ctrl_c_answers_what_waits_and_stops_at_once(
    environment: dict[str, str], workdir: Path, destination: Destination
) -> None:
    data_dir = workdir / ".hookyard"  # the default: `listen` in the same directory finds `up` by it
    ports = {"edge_port": free_port(), "control_port": free_port()}
    metrics_port = free_port()
    environment = {**environment, "HOOKYARD_CONTROL_METRICS_PORT": str(metrics_port)}
    up = Up(environment, workdir / "up.log", **ports, cwd=workdir, data_dir=data_dir)
    listen: Proc | None = None
    try:
        up.wait_up()
        created = httpx.post(
            up.control_url + "/v1/endpoints",
            json={"name": "shutdown"},
            headers={"authorization": f"Bearer {up.key}"},
            timeout=10,
            trust_env=False,
        )
        assert created.status_code == 201, created.text
        ep = created.json()["id"]
        listen = Proc(["listen", ep, "--forward-to", destination.url], clean_env(), workdir / "listen.log", cwd=workdir)
        listen.wait_for_output("Forwarding to")
        parked = Parked(up, ep)
        wait, follow, stream = parked.open()
        parked_all = "listen's poll, both waits and the stream parked on the control plane"
        until(lambda: _waiters(metrics_port) >= 4, 30, parked_all)
        until(lambda: "event: sync" in parked.stream_lines, 10, "the stream's first event")

        took = up.ctrl_c()
        assert up.proc.returncode == 0, up.output
        assert took < STOP_S, f"hookyard up took {took:.1f}s to stop:\n{up.output}"
        assert "did not stop within" not in up.output
        assert "Traceback" not in up.output
        if "DATABASE_URL" not in environment:  # the embedded servers' stop is said, not silent (it can take seconds)
            stopping = up.output.find("stopping the embedded Postgres and Redis (Postgres first writes its checkpoint)")
            assert -1 < stopping < up.output.find("embedded servers stopped in "), up.output
            # The worker's start line names the embedded Postgres by its socket (its DSN has no host).
            assert re.search(r"worker: running flush, .*; database postgresql:// \(socket in /", up.output), up.output

        answered = wait.result(5)
        assert answered.status_code == 204, answered.text
        followed = follow.result(5)
        assert followed.status_code == 204, followed.text
        assert followed.headers["hookyard-cursor"]
        assert stream.result(5) is True

        listen.wait_for_output("cannot reach the control plane at .*retrying")  # carries on, waiting for it
        assert listen.interrupt() == 0
        assert listen.output.rstrip().endswith("stopped")
        assert "Traceback" not in listen.output

        # Only pgserver's own lock directory may stay: shared by every pgserver on the machine, and where
        # platformdirs puts a runtime dir without XDG_RUNTIME_DIR (the log config and metrics were ours).
        left = {p.name for p in Path(environment["TMPDIR"]).iterdir()} - {f"runtime-{os.getuid()}"}
        assert left == set()
        assert not (data_dir / "instance.json").exists()
    finally:
        for proc in (listen, up):
            if proc is not None:
                proc.kill()
