"""A standalone ``hookyard worker`` says what it runs once it has reached its database and Redis: it printed
nothing at all, and a trial's worker started without ``HOOKYARD_ENCRYPTION_KEYS`` was told so only by its
sweep failing over and over. A real worker process (``tests.stack``) on the test's database and Redis."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec

from control.workers.main import started_line
from shared.logs import safe_url
from shared.settings import Settings
from tests.conftest import make_account
from tests.onboarding.clirun import cli, until
from tests.stack import Stack, hookyard_command


def _with_password(dsn: str, password: str) -> str:
    """The DSN with a password the log must not show (the test server trusts loopback: any password goes)."""
    parts = urlsplit(dsn)
    user = parts.username or "postgres"
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port or 5432}"))


def _start_line(stack: Stack, *loops: str) -> tuple[str, str]:
    """A worker of ``loops`` started and stopped: its start line, and its whole log."""
    try:
        stack.start_worker("worker", *loops)
        log = stack.log_dir / "worker.log"
        line: str = until(
            lambda: next((x for x in log.read_text().splitlines() if "worker: running" in x), None),
            timeout=30,
            what="the worker's start line",
        )
    finally:
        stack.stop_all()
    return line, log.read_text()


def test_a_standalone_worker_says_what_it_runs_and_reached(settings: Settings, tmp_path: Path) -> None:
    database_url = _with_password(settings.database_url or "", "s3cret-pw")
    line, log = _start_line(Stack(settings, tmp_path, DATABASE_URL=database_url), "deliver", "sweep")
    assert "worker: running deliver, sweep (2 loop(s)); " in line, line
    assert f"database {safe_url(database_url)}, redis {safe_url(settings.redis_url or '')}; " in line, line
    assert "s3cret-pw" not in log
    (kid,) = (entry.partition(":")[0] for entry in settings.encryption_keys)
    assert line.endswith(f"secrets sealed with key {kid!r}, opened with {kid!r}"), line
    assert settings.encryption_keys[0].partition(":")[2] not in log  # the key's id only, never the key


def test_a_worker_without_encryption_keys_says_so_at_start(settings: Settings, tmp_path: Path) -> None:
    """As the trial ran edge, control and worker apart from ``up``, whose keys were in its data dir."""
    line, _ = _start_line(Stack(msgspec.structs.replace(settings, encryption_keys=()), tmp_path), "retries")
    assert line.endswith(
        "no HOOKYARD_ENCRYPTION_KEYS: a sealed secret cannot be opened (up keeps its keys in its data dir)"
    )


def test_the_start_line_counts_what_it_names(settings: Settings, tmp_path: Path) -> None:
    """It read ``running flush, learn, deliver, sweep, retries, alerts, erasures (8 loop(s))``: flush's lanes
    were counted, not named."""
    stack = Stack(settings, tmp_path, HOOKYARD_FLUSH_LANES="3")
    line, _ = _start_line(stack, "flush", "deliver")
    assert "worker: running flush, deliver (2 loop(s); flush in 3 lanes); " in line, line


def test_the_start_line_says_where_spans_go_without_the_headers(settings: Settings, tmp_path: Path) -> None:
    """A trial found nothing saying tracing was on, or where it exported. The headers usually hold a vendor's
    key: that they are set is said, never their value; the endpoint by host and port (no user info)."""
    stack = Stack(
        settings,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://user:pw-in-url@127.0.0.1:9/otlp",  # nobody listens on port 9
        OTEL_EXPORTER_OTLP_HEADERS="x-api-key=s3cret-token",
        OTEL_TRACES_SAMPLER="parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG="0.1",
    )
    line, log = _start_line(stack, "retries")
    assert line.endswith(
        "; tracing: spans to http://127.0.0.1:9 (sampler parentbased_traceidratio 0.1) with the headers set (not "
        "shown) over OTLP/HTTP"  # no backlog metrics: this worker serves no /metrics, so reads no backlog
    ), line
    assert "s3cret-token" not in log
    assert "pw-in-url" not in log


async def test_a_burst_without_encryption_keys_fails_in_one_line(
    settings: Settings, database_url: str, tmp_path: Path
) -> None:
    """``hookyard worker sweep --burst`` without keys ended in a 48-line ExceptionGroup traceback, the
    ConfigError on its last line: now that line alone, as every other setting's error, and exit 2. The sweep
    rebuilds the edge's configs (a Redis prefix that has none), which opens the endpoint's sealed secret."""
    stack = Stack(settings, tmp_path)
    try:
        stack.start_control()
        account = await make_account(database_url)
        async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers) as api:
            ep = (await api.post("/v1/endpoints", json={"name": "sealed"})).json()["id"]
            sealed = await api.patch(f"/v1/endpoints/{ep}/auth-config", json={"secret": "whsec_" + "k" * 32})
            assert sealed.status_code == 200, sealed.text
    finally:
        stack.stop_all()
    env = {k: v for k, v in stack.env.items() if k != "HOOKYARD_ENCRYPTION_KEYS"}
    done = cli({**env, "HOOKYARD_REDIS_PREFIX": f"{settings.redis_prefix}-nokeys"}, "worker", "sweep", "--burst")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "ExceptionGroup" not in done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.startswith("hookyard: ")]
    assert said.startswith("hookyard: HOOKYARD_ENCRYPTION_KEYS"), done.stderr


def test_a_second_worker_on_a_taken_metrics_port_names_the_setting(settings: Settings, tmp_path: Path) -> None:
    """A trial's second worker on one host, same ``HOOKYARD_WORKER_METRICS_PORT``, died with asyncio's ``OSError:
    [Errno 98] error while attempting to bind ...`` and exit 1: a bad setting is one line naming it, exit 2."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack = Stack(settings, tmp_path, HOOKYARD_HOST="127.0.0.1", HOOKYARD_WORKER_METRICS_PORT=str(port))
        done = subprocess.run(
            [*hookyard_command(), "worker", "flush"], env=stack.env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"hookyard: HOOKYARD_WORKER_METRICS_PORT={port}: cannot listen on 127.0.0.1:{port} "), line
    assert "a port of its own, or 0 for none" in line, line


def test_a_worker_says_when_it_begins_stopping_and_what_it_handed_back(settings: Settings, tmp_path: Path) -> None:
    """An operator's SIGTERM was followed by nothing in the worker's log until it was gone."""
    stack = Stack(settings, tmp_path)
    log = stack.log_dir / "worker.log"
    try:
        stack.start_worker("worker", "deliver", "retries")
        until(lambda: "worker: running" in log.read_text(), timeout=30, what="the worker's start line")
        stack.kill("worker", signal.SIGTERM)  # waits for its exit
    finally:
        stack.stop_all()
    lines = log.read_text().splitlines()
    began = [i for i, x in enumerate(lines) if "worker: SIGTERM: stopping; nothing new is taken" in x]
    done = [i for i, x in enumerate(lines) if "worker: stopped in " in x]
    assert len(began) == 1, lines
    assert len(done) == 1, lines
    assert began[0] < done[0], lines
    assert lines[done[0]].endswith(
        "; deliver: 0 in-flight sends finished, 0 cut off (0 of them before sending: handed back uncounted), "
        "0 claimed ahead handed back unsent"
    ), lines[done[0]]


def test_the_start_line_on_a_redis_cluster_says_so_and_the_shards(settings: Settings) -> None:
    line = started_line(settings, ("flush",), [], cluster=3)
    assert f", redis {safe_url(settings.redis_url or '')} (a Redis Cluster of 3 masters, " in line, line
    assert f"{settings.stream_shards} ingest shards); " in line, line
    assert "Redis Cluster" not in started_line(settings, ("flush",), [])
