"""The README and the tour (docs/tour.md, where the README's first hour goes on) run as written.

Every shell block of README.md and then of docs/tour.md, in order and in one session (the tour uses the ids
and variables the README's commands made), against one ``hookyard up`` on ports other than the README's, in a
directory of its own (so ``.hookyard/api_key`` is that instance's), with each documented output checked by
its shape and the ids later commands use captured from earlier outputs (``docrun`` and ``docshape`` say how;
the conventions are in ``docshape``'s docstring). The README's ``localhost:3000`` is an app of this test that
answers ``ok``; its ``localhost:4000`` is a port nothing listens on (the destination that is down). The
install commands are not run (the suite runs installed); they are checked against what CI runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import stripe

from tests.conftest import Servers
from tests.helpers import module_database_url
from tests.onboarding.clirun import until
from tests.onboarding.docrun import Session
from tests.onboarding.docshape import commands, fenced_blocks
from tests.onboarding.upinstance import Instance, running_up

pytestmark = pytest.mark.slow

database_url = module_database_url

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TOUR = ROOT / "docs" / "tour.md"
RUN = "pip install -e . && hookyard up"
TEST = 'pip install -e ".[dev]" && python -m pytest'
README_SECRET = "whsec_my_local_secret_123"


def substitutions(instance: Instance) -> dict[str, str]:
    """The README's addresses → this instance's."""
    return {
        "127.0.0.1:8000": f"127.0.0.1:{instance.control_port}",
        "127.0.0.1:8080": f"127.0.0.1:{instance.edge_port}",
        "localhost:3000": f"localhost:{instance.app.port}",
        "localhost:4000": f"localhost:{instance.down_port}",
    }


@pytest.fixture(scope="module")
def instance(servers: Servers, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    with running_up(servers, database_url, tmp_path_factory.mktemp("readme")) as running:
        yield running


def test_the_install_commands_are_the_ones_ci_runs() -> None:
    """The Quickstart's first block: running installs only what running needs, testing adds the dev extras,
    and CI runs exactly the README's test command."""
    start, lines = fenced_blocks(README.read_text())[0]
    written = [command.text.split("#")[0].strip() for command in commands(lines, start)]
    assert written == [RUN, TEST]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == TEST


def _answers(session: Session, fragment: str) -> list[Any]:
    return [json.loads(out) for command, out in session.ran if fragment in command.text and out.startswith("{")]


def test_the_readme_runs_as_written(instance: Instance) -> None:
    session = Session(instance.home, instance.env, substitutions(instance))
    blocks = fenced_blocks(README.read_text())[1:] + fenced_blocks(TOUR.read_text())  # the README's first: the install
    try:
        for start, lines in blocks:
            for command in commands(lines, start):
                session.run(command)
            session.end_block()
    finally:
        session.close()

    ran = "\n".join(command.text for command, _ in session.ran)
    for taught in ("hookyard listen", "hookyard trigger", "hookyard open", "/api/start", "/test-webhook",
                   "/events/wait?after=", "/replay", "/deliveries/retry", "/labels", "/schemas", "/allowlist",
                   "/stats"):  # fmt: skip
        assert taught in ran, f"no command of the README or the tour with {taught!r} ran"
    # What the README's outputs show by shape, in numbers: the two refusals it shows, counted by reason
    # (each edge writes its counts about once a second, so they may trail the README's stats call).
    (stats,) = _answers(session, "/stats")
    endpoint_id = stats["endpoint_id"]

    def refused() -> dict[str, Any] | None:
        url = f"{instance.control_url}/v1/endpoints/{endpoint_id}/stats"
        answer = httpx.get(url, headers={"authorization": f"Bearer {instance.key}"}, timeout=10).json()["refused"]
        return answer if answer["total"] >= 2 else None

    counted = until(refused, timeout=15, what="the README's two refusals in the stats")
    assert counted["total"] == 2, counted
    assert counted["ip_not_allowed"] == 1
    assert counted["signature_invalid"]["missing_header"] == 1
    # Everything that reached the app was signed with the README's secret in the provider's own header, where
    # Stripe's library verifies it: listen's forward of the trigger's sample (--resign-with), `hookyard replay`
    # (nothing typed again: the secret listen kept) and the /v1 replay (no `signature_header` given).
    received = instance.app.requests
    assert len(received) == 3, [(r.target, r.headers) for r in received]
    for r in received:
        stripe.Webhook.construct_event(r.body, r.headers["stripe-signature"], README_SECRET)
        assert "x-signature" not in r.headers
    (replayed,) = [out for command, out in session.ran if command.text.startswith("hookyard replay")]
    assert "re-signed as listen does" in replayed, replayed
