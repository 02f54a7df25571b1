"""hookyard commands as a user runs them, for the first-hour and CLI tests: one-shot (``cli``) or long-running
in their own session with their output in a file (``Proc``; ``Up`` for ``hookyard up``), in a directory of
their own if asked (``cwd``, where the default data dir ``.hookyard`` is), a deadline-bound wait (``until``),
the ``procs`` fixture that kills what a test started, and a stack for a module's CLI tests (``shared_stack``,
on ``module_settings`` from tests.helpers) with an account per test, its key in the CLI's environment
(``stack_cli_and_api``); the conftests of tests/onboarding and tests/cli import the fixtures. ``clean_env`` is
this machine's environment without any hookyard setting: only what a test sets applies, as in a fresh shell."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from control.support.client_tls import verify_for
from shared.settings import Settings
from tests.conftest import make_account
from tests.stack import Stack, free_port, hookyard_command, stop_embedded_postgres, stop_embedded_redis

__all__ = (
    "Proc",
    "Up",
    "clean_env",
    "cli",
    "ok",
    "procs",
    "project_dir",
    "shared_stack",
    "stack_cli_and_api",
    "until",
    "up_in",
)


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(extra)
    return env


def cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*hookyard_command(), *args], env=env, capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The output of a command asserted to have succeeded without a traceback."""
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


@contextlib.contextmanager
def project_dir(prefix: str) -> Iterator[Path]:
    """A project directory outside pytest's temp root (an embedded Postgres must keep reaching its files: see
    tests/cli), removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


class Proc:
    def __init__(self, args: list[str], env: dict[str, str], log: Path, *, cwd: Path | None = None) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [*hookyard_command(), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=cwd,
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait_for_output(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        found = until(
            lambda: re.search(pattern, self.output, re.MULTILINE) or self.proc.poll() is not None, timeout, pattern
        )
        if not isinstance(found, re.Match):
            raise AssertionError(f"{pattern!r} not in the output of {self.proc.args}:\n{self.output}")
        return found

    def interrupt(self) -> int:
        """Ctrl-C: the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """The long-running commands a test starts; each killed after it, however it ended."""
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.kill()


class Up(Proc):
    """``hookyard up`` in a session of its own (a terminal's process group), on the ports given."""

    def __init__(
        self, env: dict[str, str], log: Path, *, edge_port: int, control_port: int, cwd: Path, data_dir: Path
    ) -> None:
        self.edge_port, self.control_port, self.data_dir = edge_port, control_port, data_dir
        args = ["up", "--data-dir", str(data_dir), "--edge-port", str(edge_port), "--control-port", str(control_port)]
        super().__init__(args, env, log, cwd=cwd)

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    @property
    def edge_url(self) -> str:
        return f"http://127.0.0.1:{self.edge_port}"

    @property
    def key(self) -> str:
        return (self.data_dir / "api_key").read_text().strip()

    def wait_up(self) -> None:
        self.wait_for_output("^hookyard is up: control ", timeout=120)

    def kill(self) -> None:
        """SIGKILL to ``up``'s process group and to every process it started (each runs in a session of its
        own, so that a terminal's Ctrl-C reaches ``up`` alone: killing the group once left the edge's granian
        serving after the test), its embedded Redis stopped. Not that of an ``up`` that had already exited
        (it stopped its Redis itself): another ``up`` may run on the same data dir by now, and its Redis is
        not ours to stop (that cost a test 15 s of SIGTERM waiting)."""
        running = self.proc.poll() is None
        started: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            started = psutil.Process(self.proc.pid).children(recursive=True) if running else []
        super().kill()
        for child in started:
            with contextlib.suppress(psutil.Error):
                if not child.name().startswith("redis-server"):  # stopped below, gracefully
                    child.kill()
        if running:
            stop_embedded_redis(self.data_dir)
            stop_embedded_postgres(self.data_dir)

    def ctrl_c(self) -> float:
        """Ctrl-C as a terminal sends it, to the whole process group: the seconds until ``up`` exited."""
        started = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"hookyard up did not stop within 30s:\n{self.output}") from None
        return time.monotonic() - started


@contextlib.contextmanager
def up_in(project: Path, env: dict[str, str]) -> Iterator[Up]:
    """``hookyard up`` run from ``project`` (data in its ``.hookyard``) on free ports other than the defaults,
    ready, and killed afterwards: what a module's tests share."""
    running = Up(
        env,
        project / "up.log",
        edge_port=free_port(),
        control_port=free_port(),
        cwd=project,
        data_dir=project / ".hookyard",
    )
    try:
        running.wait_up()
        yield running
    finally:
        running.kill()


@pytest.fixture(scope="module")
def shared_stack(module_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One edge, control and worker for the module's tests, which each use their own account and endpoints."""
    stack = Stack(module_settings, tmp_path_factory.mktemp("cli-stack"))
    try:
        stack.start_edge()
        stack.start_control()
        stack.env["HOOKYARD_LOG_ACTIVITY"] = "true"  # the worker's log says what it stored and delivered
        stack.start_worker()
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture
async def stack_cli_and_api(
    shared_stack: Stack, module_settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[Stack, dict[str, str], httpx.Client]]:
    if "control" not in shared_stack.procs:  # a test that restarts it failed before it could
        shared_stack.start_control()
    account = await make_account(module_settings.database_url)
    env = {**shared_stack.env, "HOOKYARD_API_KEY": account.key, "HOOKYARD_DATA_DIR": str(tmp_path / "cli")}
    verify = verify_for(shared_stack.control_url)  # TLS trust only for https (control.support.client_tls)
    with httpx.Client(base_url=shared_stack.control_url, headers=account.headers, timeout=30, verify=verify) as api:
        yield shared_stack, env, api
