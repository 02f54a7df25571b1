"""``hookyard ... --help`` as a user reads it (a subprocess, as tests/cli does): replay's line agrees with
what it does (re-signed as listen re-signs unless --verbatim), every command has a description, an admin
command's --data-dir speaks of its database (no API key involved), rotation says what must happen first, and
``account`` shows that ``create`` needs --email."""

from __future__ import annotations

import os
import subprocess
import sys

CLI = [sys.executable, "-m", "control.cli"]


def _help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "400"}  # argparse wraps (and hyphen-breaks) at the terminal's width
    done = subprocess.run([*CLI, *args, "--help"], env=env, capture_output=True, text=True, timeout=60, check=True)
    return " ".join(done.stdout.split())


def test_replay_is_described_alike_in_the_list_and_its_own_help() -> None:
    listed = _help()
    assert "again, verbatim" not in listed
    assert "re-signed as hookyard listen re-signs; --verbatim: as captured" in listed
    assert "hookyard listen re-signs with" in _help("replay")


def test_up_has_a_description() -> None:
    assert "Runs the edge, the control plane and the workers in the foreground" in _help("up")


def test_admin_commands_data_dir_is_their_database() -> None:
    for command in (("migrate",), ("rotate-encryption-key",), ("account", "create")):
        text = _help(*command)
        assert "saved API key" not in text, command
        assert "whose database to use" in text, command
    assert "saved API key" in _help("replay")  # a client command does use it


def test_rotate_encryption_key_says_the_processes_need_the_keys_first() -> None:
    text = _help("rotate-encryption-key")
    assert "Before running it, give every running control and worker process that same key list" in text
    assert "running control and workers need the new key list first" in _help()


def test_account_shows_that_create_needs_email() -> None:
    assert "create --email EMAIL" in _help("account")
    assert "--email EMAIL (required)" in _help("account")
