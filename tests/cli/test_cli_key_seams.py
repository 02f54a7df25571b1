"""A key that cannot be sent as a header value (pasted across lines, with a space, a non-ASCII character) is
refused before anything is sent, naming where it was read and what is wrong, never the key: httpx's own
refusal quoted the whole ``Authorization`` header, under "cannot reach the control plane"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from control.cli.remote import Remote
from control.cli.remote_mcp import RemoteOverMcp
from shared.errors import ConfigError
from tests.conftest import make_account
from tests.onboarding.clirun import cli
from tests.stack import Stack

pytestmark = pytest.mark.slow

_EP = "ep_01J00000000000000000000000"


def _env(stack: Stack, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in stack.env.items() if k != "HOOKYARD_API_KEY"}
    return {**env, "HOOKYARD_DATA_DIR": str(tmp_path), **extra}


async def test_a_key_that_is_no_header_value_is_refused_naming_where_it_came_from(
    stack: Stack, database_url: str, tmp_path: Path
) -> None:
    stack.start_control()
    key = (await make_account(database_url)).key
    url = ["--control-url", stack.control_url]
    broken = {
        "a line break at character 11": key[:10] + "\n" + key[10:],
        "a space at character 9": key[:8] + " " + key[8:],
        "a non-ASCII character at character 5": key[:4] + "é" + key[4:],
        "a control character at character 3": key[:2] + "\x01" + key[2:],
    }
    for what, value in broken.items():
        for command in (["open", _EP, "--no-browser"], ["trigger", "stripe", "--endpoint", _EP]):
            done = cli(_env(stack, tmp_path, HOOKYARD_API_KEY=value), *command, *url)
            assert done.returncode == 2, done.stderr
            assert done.stderr.startswith(f"hookyard: HOOKYARD_API_KEY is not a usable API key: it has {what} of ")
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert key[10:] not in done.stderr
            assert "cannot reach" not in done.stderr
            # the hint fits the character: only a line break suggests a paste across lines
            hint = "was it pasted across lines?" if "line break" in what else "a key is letters, digits and _ only"
            assert done.stderr.strip().endswith(f"({hint})"), done.stderr

    (tmp_path / "api_key").write_text(key[:10] + "\n" + key[10:] + "\n")
    from_file = cli(_env(stack, tmp_path), "open", _EP, "--no-browser", *url)
    assert from_file.returncode == 2, from_file.stderr
    assert from_file.stderr.startswith(f"hookyard: the key file {tmp_path / 'api_key'} is not a usable API key: ")
    assert key[10:] not in from_file.stderr


@pytest.mark.parametrize("client", [Remote, RemoteOverMcp])
async def test_a_header_httpx_refuses_is_no_unreachable_and_is_not_quoted(
    stack: Stack, client: type[Remote], database_url: str
) -> None:
    """Past ``saved_key`` (a key given to ``Remote`` some other way), the refusal still quotes no header."""
    stack.start_control()
    key = (await make_account(database_url)).key
    remote = client(stack.control_url, key[:10] + "\n" + key[10:], source="--control-url")
    try:
        with pytest.raises(ConfigError) as refused:
            await remote.endpoint_by_id(_EP)
    finally:
        await remote.aclose()
    said = str(refused.value)
    assert said.startswith(f"the request to the control plane at {stack.control_url} (from --control-url) could not")
    assert "LocalProtocolError" in said
    assert key[10:] not in said
    assert "Bearer" not in said


def test_listen_says_which_of_endpoint_and_start_is_wrong(tmp_path: Path) -> None:
    """Neither named read "(not both)", which a trial user found confusing: each case says its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
    env |= {"HOOKYARD_DATA_DIR": str(tmp_path), "HOOKYARD_API_KEY": "hy_live_" + "a" * 32}
    url = ["--forward-to", "http://127.0.0.1:9/x"]
    neither = cli(env, "listen", *url)
    assert neither.returncode == 2, neither.stderr
    assert neither.stderr.strip() == "hookyard: listen: name an ENDPOINT to follow, or --start for a new temporary one"
    both = cli(env, "listen", _EP, "--start", *url)
    assert both.returncode == 2, both.stderr
    assert both.stderr.strip() == "hookyard: listen: name an ENDPOINT or --start for a new temporary one, not both"
