"""Issue 45: ``hookyard listen --resign-with S`` forwarded events the local app verified, and the ``hookyard
replay`` after it sent the captured signature, which the app refused: ``--resign-with`` had to be typed again.

Now ``listen`` keeps S in the data dir (0600, never printed) and ``replay`` re-signs with it, as does ``listen``
restarted with its "restart with:" line; ``--verbatim`` sends as captured. Each forward ``listen`` makes is
recorded on its event, so ``hookyard tail`` shows it beside replays.

One ``hookyard up`` as a fresh clone runs it (embedded servers, ports other than the defaults), every command
in the project directory with no flag naming an instance, an endpoint or a URL; the app verifies with Stripe's
own library (``tests/onboarding/verifying_app``).
"""

from __future__ import annotations

import base64
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.onboarding.clirun import Proc, Up, clean_env, cli, project_dir, until, up_in
from tests.onboarding.verifying_app import VerifyingApp, verifying_app

pytestmark = pytest.mark.slow

SECRET = "whsec_" + base64.b64encode(os.urandom(24)).decode()


@pytest.fixture(scope="module")
def project() -> Iterator[Path]:
    with project_dir("hookyard-resign-") as path:
        yield path


@pytest.fixture(scope="module")
def up(project: Path) -> Iterator[Up]:
    with up_in(project, clean_env()) as running:
        yield running


@pytest.fixture
def app() -> Iterator[VerifyingApp]:
    with verifying_app(SECRET) as running:
        yield running


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return done.stdout


def test_replay_and_a_restart_re_sign_as_listen_did_and_tail_shows_its_forwards(
    up: Up, project: Path, app: VerifyingApp
) -> None:
    env = clean_env()
    args = ["listen", "--start", "--forward-to", app.url, "--resign-with", SECRET]
    listen = Proc(args, env, project / "listen.log", cwd=project)
    tail: Proc | None = None
    try:
        restart = listen.wait_for_output(r"^  restart with: (.*)$").group(1)
        listen.wait_for_output("^Forwarding to")
        listen.wait_for_output(r"^Re-signing each event in its provider's own header with the secret given")
        tail = Proc(["tail"], env, project / "tail.log", cwd=project)  # follows the endpoints there are
        tail.wait_for_output("^Following")

        sent = _ok(cli(env, "trigger", "stripe", "payment_intent.succeeded", cwd=project))
        event_id = re.fullmatch(r"sent payments payment_intent\.succeeded to ep_\w+: 200, (evt_\w+)\n", sent).group(1)
        listen.wait_for_output(rf"→ 200 .*{event_id}$")
        until(lambda: len(app.snapshot()) == 1, 10, "the forward")
        assert app.snapshot()[0].libraries == ["stripe"]
        # tail shows the forward listen made (recorded on the event), with where it went
        tail.wait_for_output(rf"delivery  ep_\w+  listen\s+{re.escape(app.url)}\s+→ 200 .*{event_id}$")

        # replay, with nothing typed again: re-signed as listen does, and the app accepts it
        replayed = _ok(cli(env, "replay", cwd=project))
        assert re.fullmatch(
            rf"replayed {event_id} to {re.escape(app.url)}, re-signed as listen does: 200, \d+ ms \(dlv_\w+\)\n",
            replayed,
        ), replayed
        assert [c.libraries for c in app.snapshot()] == [["stripe"], ["stripe"]]
        # --verbatim: as captured (signed with the endpoint's secret, not the app's): refused by the app
        verbatim = cli(env, "replay", "--verbatim", cwd=project)
        assert verbatim.returncode == 1, verbatim.stdout + verbatim.stderr
        assert re.fullmatch(rf"replayed {event_id} to {re.escape(app.url)}: 401, .*\n", verbatim.stdout)
        assert app.snapshot()[2].error is not None
        tail.wait_for_output(rf"delivery  ep_\w+  replay\s+{re.escape(app.url)}\s+→ 401 .*{event_id}$")

        # restarted as it said, the secret not on its line: it still re-signs
        assert SECRET not in restart
        assert listen.interrupt() == 0
        # A full suite run once saw the restarted listen find no up here: say so with up's own output if so.
        assert up.proc.poll() is None, f"hookyard up exited ({up.proc.returncode}):\n{up.output}"
        again = Proc(restart.split()[1:], env, project / "listen-again.log", cwd=project)
        try:
            again.wait_for_output(r"^Re-signing each event .* with the secret of the run before")
            sent = _ok(cli(env, "trigger", "stripe", "invoice.paid", cwd=project))
            second = re.search(r"(evt_\w+)\n$", sent).group(1)
            again.wait_for_output(rf"→ 200 .*{second}$")
            assert app.snapshot()[-1].libraries == ["stripe"]
            assert again.interrupt() == 0
        finally:
            again.kill()
        assert SECRET not in listen.output + again.output + tail.output
    finally:
        listen.kill()
        if tail is not None:
            tail.kill()

    # kept where listen records its target, readable by its owner only
    data_dir = project / ".hookyard"
    kept = [data_dir / "last-endpoint.json", *sorted((data_dir / "listen").glob("*.json"))]
    assert len(kept) == 2
    for path in kept:
        assert SECRET in path.read_text(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
