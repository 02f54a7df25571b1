"""The ``hookyard`` command as a user runs it: real processes against real Postgres and Redis.

``hookyard up`` runs as a child process with its output in a file (a pipe that nobody reads would block it
once full); the tests wait on conditions with deadlines and check, with psutil, that every process it
started is gone afterwards, including the embedded servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import httpx
import psutil
import pytest

from bench.ports import free_port
from control.cli.embedded import running_database_url
from control.cli.local_key import LOCAL_EMAIL, LocalKey, ensure_local_key
from control.db.migrate import available
from control.service.accounts import hash_key
from tests.conftest import Servers, database_name, with_database
from tests.stack import stop_embedded_redis

CLI = [sys.executable, "-m", "control.cli"]
UP_DEADLINE_S = 60.0
STOP_DEADLINE_S = 30.0


def _env(**extra: str) -> dict[str, str]:
    """This machine's environment minus every hookyard setting: only what the test sets applies."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(extra)
    return env


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def _free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]


def _alive(proc: psutil.Process) -> bool:
    """A zombie is gone for our purposes: PID 1 in some containers never reaps daemons' exits."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _still_alive(procs: list[psutil.Process], timeout: float = 10.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    return alive


async def _fetchval(dsn: str, sql: str, *args: object) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


class Up:
    """One ``hookyard up`` process on free ports."""

    def __init__(self, tmp_path: Path, data_dir: Path, env: dict[str, str], name: str) -> None:
        self.data_dir = data_dir
        self.edge_port, self.control_port = _free_ports(2)
        self.output = tmp_path / f"{name}.log"
        argv = [*CLI, "up", "--data-dir", str(data_dir), "--host", "127.0.0.1"]
        argv += ["--edge-port", str(self.edge_port), "--control-port", str(self.control_port)]
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.tree: list[psutil.Process] = []

    @property
    def control(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    @property
    def edge(self) -> str:
        return f"http://127.0.0.1:{self.edge_port}"

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_up(self) -> None:
        """Until the banner is out (printed after both /healthz answered); then records every descendant."""
        deadline = time.monotonic() + UP_DEADLINE_S
        while "hookyard is up" not in self.text():
            if self.proc.poll() is not None:
                pytest.fail(f"hookyard up exited with {self.proc.returncode}:\n{self.text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"hookyard up not up within {UP_DEADLINE_S:.0f}s:\n{self.text()}")
            time.sleep(0.05)
        self.tree = psutil.Process(self.proc.pid).children(recursive=True)
        for url in (self.edge, self.control):
            resp = httpx.get(url + "/healthz", timeout=5, trust_env=False)
            assert (resp.status_code, resp.json()["ok"]) == (200, True)

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"hookyard up did not stop within {STOP_DEADLINE_S:.0f}s after {sig.name}:\n{self.text()}")

    def names(self) -> list[str]:
        return [p.name() for p in self.tree if _alive(p)]


def _postmaster(data_dir: Path) -> psutil.Process:
    return psutil.Process(int((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0]))


Launch = Callable[[Path, dict[str, str], str], Up]


def _api(method: str, url: str, key: str, **kwargs: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.request(method, url, headers=headers, timeout=10, trust_env=False, **kwargs)  # type: ignore[arg-type]


# --- one-off commands -----------------------------------------------------------------------------------


async def test_migrate_applies_everything_once(servers: Servers) -> None:
    name = f"hy_cli_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    admin = await asyncpg.connect(servers.database_url)
    try:
        await admin.execute(f"CREATE DATABASE {name}")
        env = _env(DATABASE_URL=with_database(servers.database_url, name))
        first, second = _cli("migrate", env=env), _cli("migrate", env=env)
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == [w for version, _ in available() for w in ("applied", version)]
        newest = available()[-1][0]
        assert (second.returncode, second.stdout.strip()) == (0, f"up to date ({newest})"), second.stderr
        recorded = await _fetchval(env["DATABASE_URL"], "SELECT count(*) FROM hy_schema_migrations")
        assert recorded == len(available())
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


async def test_account_create_prints_only_json_with_a_working_key(database_url: str) -> None:
    env = _env(DATABASE_URL=database_url)
    for email, read_only in (("dev@example.com", False), ("ro@example.com", True)):
        done = _cli("account", "create", "--email", email, *(["--read-only"] if read_only else []), env=env)
        assert done.returncode == 0, done.stderr
        body = json.loads(done.stdout)
        assert set(body) == {"account_id", "api_key"}
        assert body["account_id"].startswith("acct_")
        assert body["api_key"].startswith("hy_live_")
        conn = await asyncpg.connect(database_url)
        try:
            row = await conn.fetchrow(
                "SELECT k.account_id, k.read_only, a.email FROM api_keys k JOIN accounts a ON a.id = k.account_id "
                "WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
                hash_key(body["api_key"]),
            )
        finally:
            await conn.close()
        assert row is not None
        assert (row["account_id"], row["read_only"], row["email"]) == (
            body["account_id"],
            read_only,
            email,
        )
    again = _cli("account", "create", "--email", "dev@example.com", env=env)
    assert again.returncode == 1
    assert again.stdout == ""
    assert "already exists" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.parametrize("command", [["migrate"], ["edge"], ["control"], ["worker"], ["up"]])
def test_bad_setting_exits_2_naming_the_variable(command: list[str], tmp_path: Path) -> None:
    done = _cli(*command, env=_env(HOOKYARD_EDGE_PORT="abc", HOOKYARD_DATA_DIR=str(tmp_path / "d")))
    assert done.returncode == 2
    assert done.stderr.startswith("hookyard: HOOKYARD_EDGE_PORT"), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "d").exists()


def test_missing_database_is_a_config_error(tmp_path: Path) -> None:
    done = _cli("migrate", env=_env(HOOKYARD_DATA_DIR=str(tmp_path)))
    assert done.returncode == 2
    assert done.stderr.startswith("hookyard: DATABASE_URL"), done.stderr


def test_worker_runs_the_loops_and_rejects_unknown_names(
    servers: Servers, database_url: str, redis_prefix: str
) -> None:
    env = _env(DATABASE_URL=database_url, REDIS_URL=servers.redis_url, HOOKYARD_REDIS_PREFIX=redis_prefix)
    done = _cli("worker", "--burst", env=env)
    assert done.returncode == 0, done.stderr
    unknown = _cli("worker", "no-such-loop", env=env)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("hookyard: unknown worker loop(s) no-such-loop"), unknown.stderr


@pytest.mark.parametrize(
    "variable", ["HOOKYARD_EDGE_PORT", "HOOKYARD_CONTROL_METRICS_PORT", "HOOKYARD_WORKER_METRICS_PORT"]
)
def test_up_refuses_a_port_in_use_before_starting_anything(tmp_path: Path, variable: str) -> None:
    """A taken metrics port was found by the child only after Postgres, Redis and the migrations (exit 1)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        given = ("--edge-port", str(port)) if variable == "HOOKYARD_EDGE_PORT" else ()
        env = _env() if given else _env(**{variable: str(port)})
        done = _cli("up", "--data-dir", str(tmp_path / "d"), *given, env=env)
    assert done.returncode == 2
    assert done.stderr.startswith(f"hookyard: {variable}: port {port} on 127.0.0.1 is in use"), done.stderr
    assert not (tmp_path / "d" / "postgres").exists()


async def test_local_key_survives_a_lost_file_and_a_reset_database(database_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "api_key"
    first = await ensure_local_key(database_url, key_file)
    assert first.new
    key = first.value
    assert key.startswith("hy_live_")
    assert key_file.read_text().strip() == key
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert await ensure_local_key(database_url, key_file) == LocalKey(value=key, new=False)
    key_file.unlink()  # lost file: a new key for the same account, not a second account
    second = await ensure_local_key(database_url, key_file)
    assert second.new
    assert second.set_aside is None  # nothing was there to keep
    assert second.value != key
    assert key_file.read_text().strip() == second.value
    assert await _fetchval(database_url, "SELECT count(*) FROM accounts WHERE email = $1", LOCAL_EMAIL) == 1
    key_file.write_text("hy_live_" + "x" * 32 + "\n")  # a key this database never issued (reset database)
    third = await ensure_local_key(database_url, key_file)
    assert third.new
    assert third.value not in (key, second.value)
    assert third.set_aside is not None  # kept, not overwritten: it may work on another database
    assert third.set_aside.read_text().strip() == "hy_live_" + "x" * 32
    assert await _fetchval(database_url, "SELECT count(*) FROM accounts WHERE email = $1", LOCAL_EMAIL) == 1


# --- hookyard up ----------------------------------------------------------------------------------------


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    """Starts ``hookyard up`` processes; whatever a failed test left running is killed afterwards."""
    launched: list[Up] = []

    def start(data_dir: Path, env: dict[str, str], name: str) -> Up:
        launched.append(Up(tmp_path, data_dir, env, name))
        return launched[-1]

    yield start
    for up in launched:
        if up.proc.poll() is None:
            up.proc.kill()
            up.proc.wait()
        leftovers = list(up.tree)
        with contextlib.suppress(OSError, psutil.Error, IndexError, ValueError):
            leftovers.append(_postmaster(up.data_dir))
        for proc in leftovers:
            with contextlib.suppress(psutil.Error):
                if _alive(proc):
                    proc.kill()
        stop_embedded_redis(up.data_dir)  # one started after the tree was listed, or before a failed wait_up


@pytest.mark.slow
def test_up_on_embedded_servers_keeps_data_and_stops_cleanly(launch: Launch, private_dir: Path) -> None:
    data_dir = private_dir / "d"
    env = _env()

    first = launch(data_dir, env, "first")
    first.wait_up()
    key = (data_dir / "api_key").read_text().strip()
    assert (data_dir / "api_key").stat().st_mode & 0o777 == 0o600
    assert f"API key  {key}" in first.text()  # shown once, on the first run
    assert "redis-server" in first.names()
    postmaster = _postmaster(data_dir)
    listed = _api("GET", first.control + "/v1/endpoints", key)
    assert (listed.status_code, listed.json()) == (200, {"endpoints": []})
    created = _api("POST", first.control + "/v1/endpoints", key, json={"name": "kept"})
    assert created.status_code == 201, created.text
    assert created.json()["ingest_url"].startswith(first.edge + "/")
    assert first.stop(signal.SIGTERM) == 0, first.text()
    assert _still_alive([*first.tree, postmaster]) == []

    # Killed outright: the app processes follow it (parent-death signal); the databases stay up until
    # the next `up` on the data dir takes them over.
    second = launch(data_dir, env, "second")
    second.wait_up()
    leftovers = [p for p in second.tree if p.name().startswith("redis-server")] + [_postmaster(data_dir)]
    second.proc.kill()
    second.proc.wait()
    if sys.platform.startswith("linux"):  # the parent-death signal is a Linux feature
        # SIGTERM, so each stops as it would on Ctrl-C: on a loaded machine that took past 10 s once.
        alive = _still_alive([p for p in second.tree if p not in leftovers], timeout=30)
        assert alive == [], [" ".join(p.cmdline()) for p in alive if _alive(p)]

    third = launch(data_dir, env, "third")
    third.wait_up()
    assert (data_dir / "api_key").read_text().strip() == key
    assert "API key  in" in third.text()
    assert key not in third.text()
    listed = _api("GET", third.control + "/v1/endpoints", key)
    assert [e["name"] for e in listed.json()["endpoints"]] == ["kept"]
    dsn = running_database_url(data_dir / "postgres")
    assert dsn is not None
    assert asyncio.run(_fetchval(dsn, "SELECT count(*) FROM accounts")) == 1
    postmaster = _postmaster(data_dir)
    assert third.stop(signal.SIGINT) == 0, third.text()
    assert _still_alive([*third.tree, *leftovers, postmaster]) == []
    assert not (data_dir / "postgres" / "postmaster.pid").exists()


@pytest.mark.slow
def test_up_on_given_urls_starts_no_embedded_server(
    launch: Launch, servers: Servers, database_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "d"
    metrics = free_port()
    env = _env(
        DATABASE_URL=database_url,
        REDIS_URL=servers.redis_url,
        HOOKYARD_REDIS_PREFIX=redis_prefix,
        HOOKYARD_CONTROL_METRICS_PORT=str(metrics),
    )
    up = launch(data_dir, env, "given")
    up.wait_up()
    key = (data_dir / "api_key").read_text().strip()
    listed = _api("GET", up.control + "/v1/endpoints", key)
    assert listed.status_code == 200, listed.text
    # The banner says where control's /metrics is (it said nothing, though observability.md says it is told).
    assert f"  metrics  control /metrics on 127.0.0.1:{metrics} (not on the API port)\n" in up.text(), up.text()
    assert httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=10).status_code == 200
    assert not any(n.startswith(("redis-server", "postgres")) for n in up.names()), up.names()
    assert up.stop(signal.SIGTERM) == 0, up.text()
    assert _still_alive(up.tree) == []
    assert not (data_dir / "postgres").exists()
    assert not (data_dir / "redis").exists()


def test_a_child_killed_under_up_stops_everything_and_says_how(
    launch: Launch, servers: Servers, database_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    """The edge's granian killed outright: up says which child and how, stops the rest, and exits 1; the
    edge's own worker follows its killed parent (``shared.parent``) rather than keep the port."""
    env = _env(DATABASE_URL=database_url, REDIS_URL=servers.redis_url, HOOKYARD_REDIS_PREFIX=redis_prefix)
    up = launch(tmp_path / "d", env, "given")
    up.wait_up()
    (edge,) = [p for p in psutil.Process(up.proc.pid).children() if "edge.app:create_app" in p.cmdline()]
    edge.kill()
    assert up.proc.wait(STOP_DEADLINE_S) == 1, up.text()
    assert "edge was killed by SIGKILL while up was running; stopping everything" in up.text()
    assert _still_alive(up.tree) == []


@pytest.mark.slow
async def test_up_on_another_database_keeps_the_key_it_replaces(
    launch: Launch, servers: Servers, database_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    """A trial ran ``up`` embedded, then ``up`` with DATABASE_URL on the same data dir: the second database
    issued its own key into ``api_key`` and the first one's was gone. Now it is set aside and said so, and a
    run on the first database again puts it back."""
    other = f"{database_name(database_url)}_b"
    admin = await asyncpg.connect(servers.database_url)
    try:
        await admin.execute(f"CREATE DATABASE {other} TEMPLATE {database_name(database_url)}")
        data_dir = tmp_path / "d"
        env = _env(REDIS_URL=servers.redis_url, HOOKYARD_REDIS_PREFIX=redis_prefix)
        outputs: list[str] = []
        for name, dsn in (("a", database_url), ("b", with_database(database_url, other)), ("again", database_url)):
            up = launch(data_dir, {**env, "DATABASE_URL": dsn}, name)
            up.wait_up()
            outputs.append(up.text())
            assert up.stop(signal.SIGTERM) == 0, up.text()
            if name == "a":
                key_a = (data_dir / "api_key").read_text().strip()
            elif name == "b":
                key_b = (data_dir / "api_key").read_text().strip()
                (aside,) = data_dir.glob("api_key.replaced-*")
                assert aside.read_text().strip() == key_a
                assert aside.stat().st_mode & 0o777 == 0o600
        assert key_a != key_b
        assert f"API key  {key_b}  (new; saved in" in outputs[1]
        assert f"the key it held is not this database's: kept in {aside}" in outputs[1]
        # On the first database again: its key put back, none issued, the second database's set aside.
        assert (data_dir / "api_key").read_text().strip() == key_a
        assert f"(this database's, put back from {aside.name})" in outputs[2]
        assert key_a not in outputs[2]
        (kept,) = data_dir.glob("api_key.replaced-*")
        assert kept.read_text().strip() == key_b
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {other} WITH (FORCE)")
        await admin.close()
