"""``hookyard up`` in a shell that exports another instance's ``HOOKYARD_CONTROL_URL`` says so in one line:
the servers ignore the clients' variable, so it started silently, and ``listen``, ``trigger`` and ``tail``
run from that shell then talked to the other instance (``control.cli.up._client_url_elsewhere``). A real
``up`` (embedded Postgres and Redis) in a project directory."""

from __future__ import annotations

import pytest

from control.cli.up import _client_url_elsewhere
from tests.onboarding.clirun import clean_env, project_dir, up_in
from tests.stack import free_port

pytestmark = pytest.mark.slow


def test_up_says_that_the_shells_control_url_names_another_instance() -> None:
    other = f"http://127.0.0.1:{free_port()}"
    with project_dir("hookyard-client-url-") as project, up_in(project, clean_env(HOOKYARD_CONTROL_URL=other)) as up:
        said = up.wait_for_output(r"^.*HOOKYARD_CONTROL_URL is .*$").group(0)
        assert said.endswith(
            f"HOOKYARD_CONTROL_URL is {other}, not this up's {up.control_url}: the client commands run with it "
            "(listen, trigger, replay, tail, open) talk to that control plane instead; "
            f"unset it (unset HOOKYARD_CONTROL_URL) or set it to {up.control_url}"
        ), said


@pytest.mark.parametrize("given", ["", "http://127.0.0.1:8000", "http://localhost:8000/", "HTTP://127.0.0.1:8000"])
def test_no_line_when_it_names_this_up(given: str) -> None:
    assert (
        _client_url_elsewhere({"HOOKYARD_CONTROL_URL": given}, "http://127.0.0.1:8000", "http://127.0.0.1:8000") is None
    )


def test_the_public_url_is_this_up_too() -> None:
    public = "https://hooks.example.com"
    env = {"HOOKYARD_CONTROL_URL": f"{public}/"}
    assert _client_url_elsewhere(env, "http://127.0.0.1:8000", public) is None
