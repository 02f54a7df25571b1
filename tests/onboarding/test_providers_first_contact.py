"""The providers page's walk-through (``shared/providers/first_contact.md``, rendered into
docs/reference/providers.md) run as a user runs it: its shell blocks, in order, in ``bash`` against real
``hookyard edge``/``control``/``worker`` processes, from a directory holding ``.hookyard/api_key``, with only
the ``API`` line pointed at this stack's control port (and ``events``' ``sleep 1`` replaced by a wait of up to
4 s until the workers stored as many events as the page shows: two shared cores under a parallel test run are
slower than a user's machine, and a fixed 4 s was 12 s of idling). Every output the page shows (its ``# ...``
lines; ``…`` ends a shown prefix) must come out, in order: Slack's, Zoom's and Meta's handshakes answered, the
first events stored attributed and verified, the tampered one refused."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from shared.providers.reference import render
from tests.conftest import make_account
from tests.stack import Stack

pytestmark = pytest.mark.slow

GUIDE = Path(__file__).resolve().parents[2] / "shared" / "providers" / "first_contact.md"


def blocks(text: str) -> str:
    """The page's shell blocks, joined: what a user pastes."""
    return "\n".join(re.findall(r"^```sh\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE))


def shown(script: str) -> list[str]:
    """The outputs the page shows: its lines that are only a comment."""
    return [line[2:] for line in script.splitlines() if line.startswith("# ")]


def test_the_walk_through_is_on_the_providers_page() -> None:
    assert GUIDE.read_text().rstrip("\n") in render()
    assert len(shown(blocks(GUIDE.read_text()))) >= 12


STORED = """stored() {  # until the endpoint has stored $1 events, 4 s at most
  for _ in $(seq 40); do
    [ "$(curl -s "$API/endpoints/$ID/events" -H "$AUTH" | python3 -c "import json, sys
print(len(json.load(sys.stdin)['events']))")" -ge "$1" ] && return; sleep 0.1
  done
}
"""
"""Instead of the page's ``sleep 1`` (4 s here) before each ``events``: a poll until the endpoint holds as many
events as the page then shows, within the same 4 s; three fixed sleeps were 12 s of the test's ~15."""


def _counted(script: str) -> str:
    """Each ``events`` call given the number of lines the page shows right after it (``stored`` waits for them)."""
    lines = script.splitlines()
    for at, line in enumerate(lines):
        if line == "events":
            after = itertools.takewhile(lambda shown_line: shown_line.startswith("# "), lines[at + 1 :])
            lines[at] = f"events {sum(1 for _ in after)}"
    return "\n".join(lines)


async def test_slack_zoom_and_meta_from_the_page_alone(stack: Stack, database_url: str, tmp_path: Path) -> None:
    for tool in ("bash", "curl", "openssl", "python3"):
        assert shutil.which(tool), f"the walk-through needs {tool}"
    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    account = await make_account(database_url)
    (tmp_path / ".hookyard").mkdir()
    (tmp_path / ".hookyard" / "api_key").write_text(account.key + "\n")
    script = blocks(GUIDE.read_text())
    assert "API=http://127.0.0.1:8000/v1\n" in script
    script = script.replace("API=http://127.0.0.1:8000/v1\n", f"API={stack.control_url}/v1\n")
    assert "sleep 1; curl" in script
    script = script.replace("sleep 1; curl", 'stored "$1"; curl')
    assert script.count("\nevents\n") == 3
    script = STORED + _counted(script)
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = 0
    for expected in shown(script):
        prefix, ellipsis, _ = expected.partition("…")
        while at < len(lines) and not (lines[at].startswith(prefix) if ellipsis else lines[at] == expected):
            at += 1
        assert at < len(lines), f"{expected!r} not printed in order:\n{done.stdout}"
        at += 1
