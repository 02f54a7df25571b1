"""Real processes for end-to-end tests: ``hookyard edge``, ``hookyard control`` and ``hookyard worker``
started on free ports with the test's own database and Redis prefix, killed (whole process group) after."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from bench.ports import free_port
from control.support.client_tls import verify_for
from shared.settings import Settings, env_name

__all__ = ("Stack", "free_port", "stack", "stop_embedded_redis", "stop_group")


def hookyard_command() -> list[str]:
    """The ``hookyard`` of the interpreter running the tests (the tree under test), else the first on PATH."""
    sibling = Path(sys.executable).parent / "hookyard"
    return [str(sibling) if sibling.exists() else (shutil.which("hookyard") or "hookyard")]


def stop_embedded_redis(data_dir: Path) -> None:
    """Stop the Redis a ``hookyard up`` on ``data_dir`` embedded, if it still runs: it has a session of its own,
    so killing ``up``'s process group (a test's SIGKILL) leaves it running after the test's directory is gone.
    Only a redis-server whose working directory is that data dir's ``redis`` is stopped (its pid may be reused)."""
    redis_dir = data_dir / "redis"
    try:
        proc = psutil.Process(int((redis_dir / "redis.pid").read_text().strip()))
        ours = proc.name().startswith("redis-server") and Path(proc.cwd()) == redis_dir
    except (OSError, ValueError, psutil.Error):
        return
    if not ours:
        return
    with contextlib.suppress(psutil.Error):
        proc.terminate()
        try:
            proc.wait(10)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def stop_embedded_postgres(data_dir: Path) -> None:
    """Stop the Postgres a ``hookyard up`` on ``data_dir`` embedded, if it still runs: pg_ctl starts it outside
    ``up``'s process tree, so a test's SIGKILL of ``up`` left it running after the test's directory was gone
    (two such servers were found after two runs of one test). Only a postgres whose command line names that
    data dir is stopped (its pid may be reused); SIGQUIT is Postgres' immediate shutdown, backends included."""
    pg_dir = data_dir / "postgres"
    try:
        proc = psutil.Process(int((pg_dir / "postmaster.pid").read_text().split()[0]))
        ours = proc.name().startswith("postgres") and str(pg_dir) in " ".join(proc.cmdline())
    except (OSError, ValueError, IndexError, psutil.Error):
        return
    if not ours:
        return
    with contextlib.suppress(psutil.Error):
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(10)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _several_workers(args: tuple[str, ...]) -> bool:
    """``hookyard edge|control ... --workers N`` with N above 1."""
    if not args or args[0] not in ("edge", "control") or "--workers" not in args:
        return False
    at = args.index("--workers") + 1
    return at < len(args) and int(args[at]) > 1


class Stack:
    """Processes by name; ``start``/``kill`` them individually to test crashes and restarts."""

    def __init__(self, settings: Settings, log_dir: Path, **env: object) -> None:
        self.edge_port, self.control_port = free_port(), free_port()
        self.edge_url = f"http://127.0.0.1:{self.edge_port}"
        self.control_url = f"http://127.0.0.1:{self.control_port}"
        base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
        for field in ("database_url", "redis_url", "redis_prefix"):
            base[env_name(field)] = str(getattr(settings, field))
        if settings.encryption_keys:
            base[env_name("encryption_keys")] = ",".join(settings.encryption_keys)
        base.update(
            HOOKYARD_EDGE_PORT=str(self.edge_port),
            HOOKYARD_CONTROL_PORT=str(self.control_port),
            HOOKYARD_EGRESS="any",
            HOOKYARD_FLUSH_CLAIM_IDLE_MS="1000",
        )
        base.update({k: str(v) for k, v in env.items()})
        self.env = base
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str, port: int | None = None) -> subprocess.Popen[bytes]:
        """``name`` is a label (e.g. "edge2"); ``args`` the hookyard command (e.g. "edge", "--port", ...).

        An edge or control plane with several granian workers shares its metrics through a directory: one of
        its own in the test's directory (``metrics-{name}``) unless the test set ``HOOKYARD_METRICS_DIR``, so
        no test leaves a ``hookyard-metrics-*`` folder in /tmp, and two servers never sum each other's."""
        env = self.env
        if _several_workers(args) and "HOOKYARD_METRICS_DIR" not in env:
            env = {**env, "HOOKYARD_METRICS_DIR": str(self.log_dir / f"metrics-{name}")}
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [*hookyard_command(), *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.procs[name] = proc
        if port is not None:
            self.wait_healthy(f"http://127.0.0.1:{port}/healthz", proc)
        return proc

    def start_edge(self, name: str = "edge", port: int | None = None) -> str:
        port = port or self.edge_port
        self.start(name, "edge", "--port", str(port), port=port)
        return f"http://127.0.0.1:{port}"

    def start_control(self) -> None:
        self.start("control", "control", "--port", str(self.control_port), port=self.control_port)

    def start_worker(self, name: str = "worker", *loops: str) -> None:
        self.start(name, "worker", *loops)

    def wait_healthy(self, url: str, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
        """Polls ``url`` every 50 ms through one client: ``httpx.get`` makes a client each time, whose TLS
        context (the CA bundle loaded) cost 20-50 ms of CPU, more than a refused connection (0.3 ms), so a
        control plane's start of 1-3 s cost the test process about as much CPU as the server's own start. Even
        one client per wait loaded it, for a plain-HTTP URL: ``verify_for`` builds TLS trust for https only."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=1, trust_env=False, verify=verify_for(url)) as http:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"process exited with {proc.returncode} before {url} was healthy; see {self.log_dir}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(url).status_code == 200:
                        return
                time.sleep(0.05)
        raise TimeoutError(f"{url} not healthy after {timeout_s}s")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(20)

    def stop_all(self) -> None:
        for name in list(self.procs):
            stop_group(self.procs[name])
            self.procs.pop(name)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 10) -> None:
    """SIGTERM to the process group a ``start_new_session`` process leads; SIGKILL if it outlives ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@pytest.fixture
def stack(settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    started = Stack(settings, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()
