"""``hookyard open EP``: the real command against a real control plane prints a signed inbox link that opens
the page; without a key or a control plane it says what to do in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_account
from tests.stack import Stack, hookyard_command

pytestmark = pytest.mark.slow


def _run(stack: Stack, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in stack.env.items() if k != "HOOKYARD_API_KEY"}
    environ.update(env)
    return subprocess.run([*hookyard_command(), "open", *args], env=environ, capture_output=True, text=True, timeout=30)


async def test_prints_a_link_that_opens_the_inbox(stack: Stack, database_url: str, tmp_path: Path) -> None:
    stack.start_control()
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers) as api:
        resp = await api.post("/v1/endpoints", json={"name": "orders", "external_ref": "orders-main"})
        ep = resp.json()["id"]
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "api_key").write_text(account.key + "\n")

    for target, env in ((ep, {"HOOKYARD_DATA_DIR": str(data_dir)}), ("orders-main", {"HOOKYARD_API_KEY": account.key})):
        done = _run(stack, target, "--no-browser", **env)
        assert done.returncode == 0, done.stderr
        url = done.stdout.strip()
        assert url.startswith(f"{stack.control_url}/inbox/{ep}?link=acct_"), url
        assert "valid until" in done.stderr
        opened = httpx.get(url, follow_redirects=False)
        assert opened.status_code == 303
        page = httpx.get(f"{stack.control_url}/inbox/{ep}", cookies=opened.cookies)
        assert page.status_code == 200
        assert f'data-endpoint="{ep}"' in page.text

    missing = _run(stack, "ep_01J00000000000000000000000", "--no-browser", HOOKYARD_API_KEY=account.key)
    assert missing.returncode == 1
    # the same line as every client command's (control.cli.remote), naming the key that looked
    said = "hookyard: endpoint 'ep_01J00000000000000000000000' not found (404 not_found); the key used is "
    said += "HOOKYARD_API_KEY's"
    assert missing.stderr.startswith(said), missing.stderr
    unknown_ref = _run(stack, "nope", "--no-browser", HOOKYARD_API_KEY=account.key)
    assert unknown_ref.returncode == 1
    assert "no endpoint with id or external_ref 'nope'" in unknown_ref.stderr


def test_without_a_key_or_a_control_plane_one_line_says_what_to_do(stack: Stack, tmp_path: Path) -> None:
    no_key = _run(stack, "ep_01J00000000000000000000000", HOOKYARD_DATA_DIR=str(tmp_path))
    assert no_key.returncode == 2
    assert no_key.stderr.startswith("hookyard: no API key: set HOOKYARD_API_KEY")
    assert len(no_key.stderr.strip().splitlines()) == 1
    down = _run(stack, "ep_01J00000000000000000000000", "--no-browser", HOOKYARD_API_KEY="hy_live_x")
    assert down.returncode == 1
    assert down.stderr.startswith(f"hookyard: cannot reach the control plane at {stack.control_url}")
