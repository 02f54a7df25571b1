"""What control and the worker say about ``HOOKYARD_ENCRYPTION_KEYS`` before anything is stored. An operator's
trial ran control without keys: it started silently, the clear-text warning came only with the first sealed
secret (the docs promised it at start), and ``HOOKYARD_ENCRYPTION_KEYS=","`` was read as "no keys". Real
processes (``tests.stack``) on the test's database and Redis."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from bench.ports import free_port
from shared.settings import Settings
from tests.onboarding.clirun import cli, until
from tests.stack import Stack

WARNING = "secrets are stored in clear text: set HOOKYARD_ENCRYPTION_KEYS"


def _without_keys(settings: Settings, tmp_path: Path) -> Stack:
    return Stack(msgspec.structs.replace(settings, encryption_keys=()), tmp_path)


def test_control_without_keys_warns_at_start(settings: Settings, tmp_path: Path) -> None:
    stack = _without_keys(settings, tmp_path)
    try:
        stack.start_control()  # healthy: started, nothing stored yet
        log = (tmp_path / "control.log").read_text()
    finally:
        stack.stop_all()
    (said,) = [line for line in log.splitlines() if WARNING in line]
    assert 'echo "k1:$(openssl rand -base64 32)"' in said, said


def test_a_worker_without_keys_warns_at_start(settings: Settings, tmp_path: Path) -> None:
    stack = _without_keys(settings, tmp_path)
    log = tmp_path / "worker.log"
    try:
        stack.start_worker("worker", "retries")
        until(lambda: "worker: running" in log.read_text(), timeout=30, what="the worker's start line")
    finally:
        stack.stop_all()
    assert [line for line in log.read_text().splitlines() if WARNING in line], log.read_text()


def test_control_with_keys_does_not_warn(settings: Settings, tmp_path: Path) -> None:
    stack = Stack(settings, tmp_path)
    try:
        stack.start_control()
    finally:
        stack.stop_all()
    assert WARNING not in (tmp_path / "control.log").read_text()


@pytest.mark.parametrize("keys", [",", "{key},", "{key},,{key2}"])
@pytest.mark.parametrize("command", ["control", "worker"])
def test_an_empty_key_entry_is_refused_in_one_line(settings: Settings, tmp_path: Path, keys: str, command: str) -> None:
    """``,`` was no keys at all (secrets then stored in clear) and a trailing comma silently nothing."""
    key = settings.encryption_keys[0]
    env = {**Stack(settings, tmp_path).env, "HOOKYARD_ENCRYPTION_KEYS": keys.format(key=key, key2="k9" + key[2:])}
    done = cli(env, command, *(["--port", str(free_port())] if command == "control" else ["retries", "--burst"]))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (said,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert said.startswith("hookyard: HOOKYARD_ENCRYPTION_KEYS: entry "), said
    assert "is empty" in said
    assert key.partition(":")[2] not in said
