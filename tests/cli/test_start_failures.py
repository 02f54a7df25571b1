"""A start that cannot work says why in one line naming the setting and the address (never its password).

An operator's trial: an edge started with Redis unreachable logged only granian's ``network:ConnectionError``
and ``ASGI lifespan startup failed``; a control plane on a database that does not exist kept running, logging
``metrics: delivery backlog unavailable`` every 5 s. A missing database is a setting's error (exit 2 at
start); Postgres not answering is an outage, waited out as the docs promise. Real processes."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from bench.ports import free_port
from control.cli.instance import RECORD
from control.db.reach import where
from shared.settings import URLS_FROM_UP, Settings
from tests.onboarding.clirun import cli, until
from tests.stack import Stack


def _dsn(settings: Settings, *, database: str, port: int | None = None) -> str:
    """The test's server (or, with ``port``, 127.0.0.1 where nobody listens) with a password the log must not
    show (the test server trusts its clients: any password goes) and another database."""
    parts = urlsplit(settings.database_url or "")
    user = parts.username or "postgres"
    if port is not None:
        return f"postgresql://{user}:s3cret-pw@127.0.0.1:{port}/{database}"
    host = f"{parts.hostname}:{parts.port or 5432}" if parts.hostname else ""  # else a socket, in the query
    return urlunsplit(parts._replace(netloc=f"{user}:s3cret-pw@{host}", path=f"/{database}"))


def test_an_edge_without_redis_names_the_setting_and_address(settings: Settings, tmp_path: Path) -> None:
    port = free_port()  # nobody listens there
    stack = Stack(settings, tmp_path, REDIS_URL=f"redis://:s3cret-pw@127.0.0.1:{port}/0")
    proc = stack.start("edge", "edge", "--port", str(stack.edge_port))
    try:
        assert proc.wait(timeout=30) != 0
    finally:
        stack.stop_all()
    log = (tmp_path / "edge.log").read_text()
    (said,) = [line for line in log.splitlines() if "cannot start" in line]
    assert f"REDIS_URL redis://127.0.0.1:{port}: ConnectionError" in said, said
    assert "s3cret-pw" not in log


@pytest.mark.parametrize("command", ["control", "worker"])
def test_a_database_that_does_not_exist_ends_the_start(settings: Settings, tmp_path: Path, command: str) -> None:
    dsn = _dsn(settings, database="hookyard_nonexist")
    args = ["--port", str(free_port())] if command == "control" else ["retries", "--burst"]
    done = cli({**Stack(settings, tmp_path).env, "DATABASE_URL": dsn}, command, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("hookyard: ")]
    assert said == f'hookyard: DATABASE_URL: {where(dsn)}: database "hookyard_nonexist" does not exist', said
    assert "s3cret-pw" not in done.stderr + done.stdout


def test_control_waits_for_a_postgres_that_does_not_answer(settings: Settings, tmp_path: Path) -> None:
    """An outage, not a setting: control starts, says so once, and waits (it answers unready meanwhile)."""
    port = free_port()
    stack = Stack(settings, tmp_path, DATABASE_URL=_dsn(settings, database="hookyard", port=port))
    proc = stack.start("control", "control", "--port", str(stack.control_port))
    log = tmp_path / "control.log"
    try:
        said = until(
            lambda: next((x for x in log.read_text().splitlines() if "does not answer yet" in x), None),
            timeout=30,
            what="control's line about its database",
        )
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1)  # still running
    finally:
        stack.stop_all()
    assert f"control: DATABASE_URL postgresql://127.0.0.1:{port} does not answer yet (" in said, said
    assert "s3cret-pw" not in log.read_text()


@pytest.mark.parametrize(
    ("command", "variable", "value", "what"),
    [
        ("edge", "HOOKYARD_TRUSTED_PROXIES", "10.0.0.1,,", "IPs or CIDRs"),
        ("worker", "HOOKYARD_RETRY_SCHEDULE_S", "1,,5", "waits in seconds"),
    ],
)
def test_an_empty_list_entry_is_refused_at_start(
    settings: Settings, tmp_path: Path, command: str, variable: str, value: str, what: str
) -> None:
    """As an empty entry of HOOKYARD_ENCRYPTION_KEYS is: it was dropped unread (a proxy not trusted, a wait
    missing from the schedule) and the server started as if the list were shorter."""
    args = ["--port", str(free_port())] if command == "edge" else ["retries", "--burst"]
    done = cli({**Stack(settings, tmp_path).env, variable: value}, command, *args)
    assert done.returncode == 2, done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert said == f"hookyard: {variable}: entry 2 of 3 is empty (a stray comma?); give {what}", said


def test_control_refuses_its_api_port_as_its_metrics_port(settings: Settings, tmp_path: Path) -> None:
    """``/metrics`` left the API port (ADR 0095); the same number for both would put it back there, or lose
    the lifespan to a bind error naming neither setting. Said at start, by name, exit 2."""
    port = free_port()
    env = {**Stack(settings, tmp_path).env, "HOOKYARD_CONTROL_METRICS_PORT": str(port)}
    done = cli(env, "control", "--port", str(port))
    assert done.returncode == 2, done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("hookyard: ")]
    assert said.startswith(f"hookyard: HOOKYARD_CONTROL_METRICS_PORT={port} is control's API port"), said


def test_control_refuses_a_metrics_port_in_use(settings: Settings, tmp_path: Path) -> None:
    """Its granian workers listen there with SO_REUSEPORT: a second server would have shared it silently."""
    taken = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        env = {**Stack(settings, tmp_path).env, "HOOKYARD_CONTROL_METRICS_PORT": str(taken)}
        done = cli(env, "control", "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("hookyard: ")]
    assert said.startswith(f"hookyard: HOOKYARD_CONTROL_METRICS_PORT: port {taken} on 127.0.0.1 is in use"), said


@pytest.mark.parametrize(
    ("command", "needed"),
    [("edge", "REDIS_URL"), ("control", "DATABASE_URL and REDIS_URL"), ("worker", "DATABASE_URL and REDIS_URL")],
)
def test_a_server_without_its_urls_says_where_up_keeps_them(tmp_path: Path, command: str, needed: str) -> None:
    """A user who ran `up` before is told where it records the URLs it runs on (the instance record), not only
    that `up` sets them: a fresh-clone trial ran `hookyard control` alone and had nowhere to look."""
    unset = ("DATABASE_URL", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_") and k not in unset}
    env["HOOKYARD_DATA_DIR"] = str(tmp_path)
    args = ["--port", str(free_port())] if command != "worker" else ["retries", "--burst"]
    done = cli(env, command, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("hookyard: ")]
    assert said.startswith(f"hookyard: {needed} must be set for "), said
    assert said.endswith(f"({URLS_FROM_UP})"), said
    assert f"data dir's {RECORD}" in said
