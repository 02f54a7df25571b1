"""The serving commands: ``up`` (everything, in the foreground), ``edge`` and ``control`` (granian), ``worker``.

``edge`` and ``control`` validate the settings here and then replace this process with granian's CLI
(``os.execve``) rather than embedding ``granian.Granian``: the process a supervisor or container runtime
signals is then granian itself, with its own tested signal and worker handling and no Python layer in
between, and every granian flag stays reachable through ``GRANIAN_*`` variables.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from control.cli.ports import check_port, control_metrics_where
from control.cli.runtime import command_settings, exit_now, run
from shared import otel_config
from shared.errors import ConfigError
from shared.parent import SERVER_PID, bind_to_parent
from shared.settings import URLS_FROM_UP, Settings, env_name

WORKERS_KILL_TIMEOUT_S = 10
"""Seconds granian waits for a stopping worker before killing it (see ``_serve``)."""

__all__ = ("add_parsers",)

log = logging.getLogger("hookyard.cli")


def add_parsers(commands: Any) -> None:
    up = commands.add_parser(
        "up",
        help="run everything in the foreground (embedded Postgres/Redis when unset)",
        description="Runs the edge, the control plane and the workers in the foreground, with an embedded Postgres "
        "and Redis in the data dir unless DATABASE_URL and REDIS_URL are set; prints its URLs and the API key's file. "
        "Ctrl-C stops it all.",
    )
    up.add_argument("--data-dir", help="where embedded data and the api_key file live (default .hookyard)")
    _add_host(up)
    up.add_argument("--edge-port", type=int, help="edge port (default 8080)")
    up.add_argument("--control-port", type=int, help="control plane port (default 8000)")
    up.set_defaults(handler=_up)

    for name, default_port in (("edge", 8080), ("control", 8000)):
        what = "edge (ingest)" if name == "edge" else "control plane (API)"
        serve = commands.add_parser(name, help=f"serve the {what} with granian (default port {default_port})")
        _add_host(serve)
        serve.add_argument("--port", type=int, help=f"port (default {default_port})")
        serve.add_argument("--workers", type=int, default=1, help="granian worker processes (default 1)")
        _add_parent_pid(serve)
        serve.set_defaults(handler=_serve)

    worker = commands.add_parser("worker", help="run worker loops (all of them when none is named)")
    worker.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="loops to run: flush, learn (schema learning; alone, at a lower CPU priority), deliver, sweep, "
        "retries (bulk delivery retries), alerts (operational alerts), erasures (erasure jobs) (default: all)",
    )
    worker.add_argument("--burst", action="store_true", help="return once every loop has nothing to do")
    _add_parent_pid(worker)
    worker.set_defaults(handler=_worker)


def _server_settings(**overrides: object) -> Settings:
    """The settings of a server command, the ``OTEL_*`` variables checked with them: each process's SDK
    reads those only once it serves (in granian's worker, after `up` had started and migrated the databases),
    where a bad one was two tracebacks; here it is one line naming it, exit 2, before anything starts."""
    settings = command_settings(**overrides)
    otel_config.check()
    return settings


def _add_host(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to bind (default 127.0.0.1; 0.0.0.0 in containers)")


def _add_parent_pid(parser: argparse.ArgumentParser) -> None:
    # Set by `hookyard up` for its children: they exit when it dies (see shared.parent).
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)


def _up(args: argparse.Namespace) -> int:
    from control.cli.up import up

    # Locally, destinations are usually other programs on this machine: egress defaults to "any" under `up`.
    egress = None if "HOOKYARD_EGRESS" in os.environ else "any"
    settings = _server_settings(
        host=args.host, edge_port=args.edge_port, control_port=args.control_port, data_dir=args.data_dir, egress=egress
    )
    exit_now(up(settings, os.environ))  # everything it started is stopped by now


def _serve(args: argparse.Namespace) -> int:
    edge = args.command == "edge"
    port_field = "edge_port" if edge else "control_port"
    settings = _server_settings(host=args.host, **{port_field: args.port})
    if not settings.redis_url or not (edge or settings.database_url):
        needed = "REDIS_URL" if edge else "DATABASE_URL and REDIS_URL"
        raise ConfigError(f"{needed} must be set for `hookyard {args.command}` ({URLS_FROM_UP})")
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {args.workers}")
    port = getattr(settings, port_field)
    check_port(settings.host, port, env_name(port_field), "--port")  # granian would share it (SO_REUSEPORT)
    if args.parent_pid is not None:
        bind_to_parent(args.parent_pid)
    if not edge and not settings.encryption_keys:  # warned here, before granian: its workers' lines come later
        from control.db.keyring import warn_if_clear  # only then: a child of `up` (always keyed) execs granian
        from control.support.sealing import keyring_of  # without the servers' libraries (test_startup_imports)

        warn_if_clear(keyring_of(settings.encryption_keys))
    if not edge and args.parent_pid is None:  # under `up`, up has just migrated this database
        from control.db.reach import check_database

        run(lambda: check_database(settings.database_url or "", who="control"))  # missing: exit 2, one line
    tracing = otel_config.describe(metrics=not edge)  # the edge exports spans only
    if tracing is not None and args.parent_pid is None:  # under `up`, its banner says it
        log.info("%s: %s", args.command, tracing)
    if not edge:
        _say_metrics(settings, port, under_up=args.parent_pid is not None)
    # The app reads its settings from the environment; make it agree with the flags.
    env = {**os.environ, env_name("host"): settings.host, env_name(port_field): str(port)}
    env[SERVER_PID] = str(os.getpid())  # granian keeps this pid after the exec: its workers follow it
    # Several granian workers share their metric totals through a directory (shared.metrics): the one set, else
    # one made per start, removed once the server has exited (_removed_after). A single worker (as under
    # `hookyard up`) needs none.
    if settings.metrics_dir or args.workers > 1:
        from shared.metrics import metrics_dir

        env[env_name("metrics_dir")] = metrics_dir(settings.metrics_dir, args.command)
        if not settings.metrics_dir:
            _removed_after(env[env_name("metrics_dir")])
    argv = [sys.executable, "-m", "granian", "--interface", "asgi", "--factory"]
    argv += ["--host", settings.host, "--port", str(port), "--workers", str(args.workers), "--loop", "uvloop"]
    argv += ["--log-level", settings.log_level, "--log-config", _granian_log_config(settings)]
    # A worker that never finishes stopping (granian's own shutdown can deadlock: emmett-framework/granian#875,
    # seen here as `hookyard edge` still running 60 s after SIGTERM) is killed after WORKERS_KILL_TIMEOUT_S
    # instead of holding the server and its port forever. Longer than any shutdown of ours: the edge writes
    # its last refusal counts within 2 s, control answers its long polls at once. GRANIAN_WORKERS_KILL_TIMEOUT
    # set by the operator wins (an explicit flag would override it).
    if "GRANIAN_WORKERS_KILL_TIMEOUT" not in env:
        argv += ["--workers-kill-timeout", str(WORKERS_KILL_TIMEOUT_S)]
    argv += ["--http", "1", "--no-ws", "edge.app:create_app"] if edge else ["control.app:create_app"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)  # noqa: S606 - becoming granian is the point
    return 0  # not reached: execve replaced this process


def _say_metrics(settings: Settings, port: int, *, under_up: bool) -> None:
    """Where control's ``/metrics`` is, said at start: it left the API port (ADR 0095), and an operator whose
    scrape of that port now gets 404 finds why in this line. One port for both is refused here, by name."""
    metrics_port = settings.control_metrics_port
    if metrics_port == port:
        raise ConfigError(
            f"HOOKYARD_CONTROL_METRICS_PORT={metrics_port} is control's API port: /metrics needs a port of its own "
            "(the API port is the tenants', and the metrics name every account's destinations)"
        )
    if metrics_port:  # each granian worker listens there with SO_REUSEPORT: a second server would share it
        check_port(settings.host, metrics_port, "HOOKYARD_CONTROL_METRICS_PORT", "the setting")
    if under_up:
        return
    log.info("control: %s", control_metrics_where(settings.host, metrics_port))  # under up, its banner says it


def _removed_after(directory: str) -> None:
    """Removes ``directory`` once this process (granian, after the exec) has exited, however it ends.

    Nothing of ours runs in granian's main process after the exec, and its workers cannot tell a server
    stopping from one of them being replaced (whose file the sum must keep), so a watcher does it: a process
    forked twice (nobody's child here: granian never reaps it, and a supervisor that reads granian's children
    finds only its workers), in a session of its own (a Ctrl-C or a signal to the server's process group does
    not end it first), holding no descriptor of ours (a pipe reading the server's output ends with it). It
    waits on a pidfd of the server, then removes the directory and exits. It was left in ``/tmp`` on every
    stop, one directory per start."""
    server = os.getpid()
    middle = os.fork()
    if middle:
        os.waitpid(middle, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        _watch(server, directory)
    finally:
        os._exit(0)


def _watch(server: int, directory: str) -> None:
    import select
    import shutil
    import signal
    import time

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(quiet, fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
    try:
        done = os.pidfd_open(server)
        select.select([done], [], [])
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+), or the server is gone already
        import psutil

        while True:
            try:
                if psutil.Process(server).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(0.5)
    shutil.rmtree(directory, ignore_errors=True)


def _granian_log_config(settings: Settings) -> str:
    """A file for granian's ``--log-config``: the app's lines in ``HOOKYARD_LOG_FORMAT`` in every worker.

    granian reads it once, in its main process, at start. The file is unlinked at once and handed over as
    ``/dev/fd/N`` of a descriptor that survives the exec, so no temporary file outlives the server however
    it ends (nothing of ours runs after the exec to remove one). Without ``/dev/fd``, a named file it is."""
    import tempfile

    from shared.logs import granian_config

    fd, path = tempfile.mkstemp(prefix="hookyard-log-", suffix=".json")
    os.write(fd, json.dumps(granian_config(settings.log_level, settings.log_format)).encode())
    if not os.path.isdir("/dev/fd"):
        os.close(fd)
        return path
    os.unlink(path)
    os.lseek(fd, 0, os.SEEK_SET)  # where /dev/fd/N is a dup of the descriptor (macOS), reading starts here
    os.set_inheritable(fd, True)
    return f"/dev/fd/{fd}"


def _worker(args: argparse.Namespace) -> int:
    from control.workers import main as workers

    settings = _server_settings()
    if args.parent_pid is not None:
        bind_to_parent(args.parent_pid)
    run(lambda: workers.run(settings, tuple(args.names), burst=args.burst))
    exit_now(0)  # drained, and its pools closed
