"""A standalone ``hookyard worker`` says what it runs once it has reached its database and Redis: it printed
nothing at all, and a trial's worker started without ``HOOKYARD_ENCRYPTION_KEYS`` was told so only by its
sweep failing over and over. A real worker process (``tests.stack``) on the test's database and Redis."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec

from shared.logs import safe_url
from shared.settings import Settings
from tests.onboarding.clirun import until
from tests.stack import Stack


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
