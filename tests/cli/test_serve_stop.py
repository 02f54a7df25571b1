"""A served plane stops within a bound even when one of its granian workers never finishes stopping, and its
workers end with it even when it is killed outright.

granian's own worker shutdown can deadlock (emmett-framework/granian#875); with its kill timeout off (granian's
default) the main process then waits on that worker forever, and `hookyard edge` was seen still running 60 s
after SIGTERM. A worker held by SIGSTOP stands in for the deadlocked one: it cannot act on the SIGTERM it is
sent, exactly as a deadlocked one does not. A ``kill -9`` of granian's main process used to leave its workers
serving the port (``shared.parent``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from control.cli.commands.serve import WORKERS_KILL_TIMEOUT_S
from shared.settings import Settings
from tests.onboarding.clirun import until
from tests.stack import Stack, free_port, hookyard_command

pytestmark = pytest.mark.slow


# granian's wait for a stuck worker, set as an operator would (``GRANIAN_WORKERS_KILL_TIMEOUT`` wins over
# hookyard's own ``--workers-kill-timeout``): the same wait-then-kill, without the test idling the 10 s default.
# That hookyard passes its default is checked on the command line of the servers started below.
KILL_TIMEOUT_S = 2


def test_a_worker_that_never_stops_is_killed_and_the_server_exits(settings: Settings, tmp_path: Path) -> None:
    stack = Stack(settings, tmp_path, GRANIAN_WORKERS_KILL_TIMEOUT=KILL_TIMEOUT_S)
    port = free_port()
    log_path = tmp_path / "edge.log"
    log = open(log_path, "ab")  # noqa: SIM115 - closed right after the start
    server = subprocess.Popen(
        [*hookyard_command(), "edge", "--port", str(port), "--workers", "2"],
        env=stack.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    stuck: psutil.Process | None = None
    try:
        stack.wait_healthy(f"http://127.0.0.1:{port}/healthz", server)
        until(lambda: log_path.read_text(errors="replace").count("Started worker") >= 2, 30, "both workers started")
        stuck = psutil.Process(server.pid).children()[0]
        os.kill(stuck.pid, signal.SIGSTOP)
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(KILL_TIMEOUT_S + 20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after SIGTERM:\n{log_path.read_text()[-3000:]}") from None
        took = time.monotonic() - started
        assert took >= KILL_TIMEOUT_S - 0.5, took  # it waited for the worker first, then killed it
        assert "refused to gracefully stop" in log_path.read_text(errors="replace")
        assert not stuck.is_running() or stuck.status() == psutil.STATUS_ZOMBIE
    finally:
        if stuck is not None and stuck.is_running():
            stuck.kill()
        if server.poll() is None:
            server.kill()
            server.wait(10)


@pytest.mark.parametrize(
    ("plane", "when"), [("edge", "serving"), ("control", "serving"), ("edge", "starting"), ("edge", "wedged")]
)
def test_workers_end_with_a_server_killed_outright(settings: Settings, tmp_path: Path, plane: str, when: str) -> None:
    """``starting``: killed as soon as its workers exist, while they load the app. ``wedged``: one worker held
    by SIGSTOP when the server is killed, running nothing of its own (as a worker whose GIL is held for good):
    only its watchdog can end it, 1 s + ``DRAIN_BOUND_S`` later."""
    stack = Stack(settings, tmp_path)
    port = free_port()
    log_path = tmp_path / f"{plane}.log"
    log = open(log_path, "ab")  # noqa: SIM115 - closed right after the start
    server = subprocess.Popen(
        [*hookyard_command(), plane, "--port", str(port), "--workers", "2"],
        env=stack.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    workers: list[psutil.Process] = []
    try:
        if when != "starting":
            stack.wait_healthy(f"http://127.0.0.1:{port}/healthz", server)
            until(lambda: log_path.read_text(errors="replace").count("Started worker") >= 2, 30, "both started")
        else:
            until(lambda: len(psutil.Process(server.pid).children()) == 2, 30, "both workers spawned")
        granian = psutil.Process(server.pid)
        workers = granian.children()
        assert len(workers) == 2, workers
        kill_timeout = granian.cmdline().index("--workers-kill-timeout")  # a stuck worker cannot hold it forever
        assert granian.cmdline()[kill_timeout + 1] == str(WORKERS_KILL_TIMEOUT_S)
        if when == "wedged":
            os.kill(workers[0].pid, signal.SIGSTOP)
        server.kill()
        server.wait(10)
        _gone, alive = psutil.wait_procs(workers, timeout=20)
        assert alive == [], f"workers outlived their server: {alive}\n{log_path.read_text()[-3000:]}"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    finally:
        for worker in workers:
            if worker.is_running():
                worker.kill()
        if server.poll() is None:
            server.kill()
            server.wait(10)


# A worker started by a server (the parent), standing in for a granian worker that cannot end itself: by the
# mode, last but one on both command lines, one whose SIGTERM handler drops the signal (granian's worker before
# it listens: the flag of the handler inherited from its main process), or one whose main thread holds the GIL
# for good (granian's shutdown deadlock: a native call that blocks without releasing it, here a mutex locked
# twice), in which no Python of the worker's runs, neither a handler nor a thread.
_SIMULATED_WORKER = """
import ctypes, os, signal, subprocess, sys, time
if sys.argv[1] == "parent":
    env = {**os.environ, "HOOKYARD_SERVER_PID": str(os.getpid())}
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", *sys.argv[-2:]], env=env)
    print(child.pid, flush=True)
    time.sleep(600)
else:
    from shared import parent
    parent.DRAIN_BOUND_S = float(sys.argv[-1])  # the bound, last on both command lines
    parent.follow_server()
    signal.signal(signal.SIGTERM, lambda *_: None)
    print("ready", flush=True)
    if sys.argv[-2] == "holds-the-gil":
        mutex = ctypes.create_string_buffer(64)  # a zeroed pthread_mutex_t is an unlocked default mutex
        libc = ctypes.PyDLL(None)  # PyDLL: the GIL stays held during the call
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)  # never returns, and no signal interrupts it
    time.sleep(600)
"""


@pytest.mark.parametrize("mode", ["loses-sigterm", "holds-the-gil"])
def test_a_worker_that_cannot_end_itself_still_ends_with_its_server(mode: str) -> None:
    """A worker that acts on no SIGTERM still ends within the drain bound once its server is killed: the
    watchdog beside it (``shared.worker_watch``) kills it. The bound is 2 s here, not the 10 s of
    ``DRAIN_BOUND_S``: its value is not what is checked, its end is."""
    bound_s = 2.0
    parent = subprocess.Popen(
        [sys.executable, "-c", _SIMULATED_WORKER, "parent", _SIMULATED_WORKER, mode, str(bound_s)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    try:
        assert parent.stdout.readline().strip() == "ready"  # the child's (it shares the pipe): it follows now
        parent.kill()
        parent.wait(10)
        started = time.monotonic()
        _gone, alive = psutil.wait_procs([child], timeout=bound_s + 10)
        assert alive == [], "the worker outlived its server"
        # Not the lost SIGTERM, nor the watchdog's own (dropped too): the kill at the end of the bound.
        assert time.monotonic() - started >= 1 + bound_s - 0.5
    finally:
        if child.is_running():
            child.kill()
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        parent.stdout.close()


def test_the_watchdog_ends_with_a_worker_that_ended_in_time() -> None:
    """A worker that drains within the bound takes its watchdog along (``PR_SET_PDEATHSIG``): no process of
    ours outlives the worker it watched."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _SIMULATED_WORKER, "parent", _SIMULATED_WORKER, "ends", "10"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    started = [child]
    try:
        assert parent.stdout.readline().strip() == "ready"
        until(lambda: len(child.children()) == 1, 10, "the watchdog started")
        started += child.children()
        child.kill()
        _gone, alive = psutil.wait_procs(started[1:], timeout=10)
        assert alive == [], "the watchdog outlived its worker"
    finally:
        for proc in started:
            if proc.is_running():
                proc.kill()
        parent.kill()
        parent.wait(10)
        parent.stdout.close()
