"""The first hour without an account: ``POST /api/start``'s ``hy_tmp_`` token in ``HOOKYARD_API_KEY``, and the
webhook commands run with it as a user runs them (subprocesses against a real edge, control and worker). /v1
refuses the token, so each command makes its operations as MCP tool calls (``control.cli.remote_mcp``); what
the token cannot do (create an endpoint) is refused in one line saying what to do instead."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import stripe

from shared.settings import Settings
from tests.cli.webhooks_support import RESIGN
from tests.conftest import make_account
from tests.destination import Destination
from tests.onboarding.clirun import Proc, cli, ok, until
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


def _start(stack: Stack, tmp_path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """``POST /api/start``'s answer, and the environment of a shell that exported its token."""
    started = httpx.post(f"{stack.control_url}/api/start", timeout=30)
    assert started.status_code == 200, started.text
    answer: dict[str, Any] = started.json()
    assert answer["api_token"].startswith("hy_tmp_")
    env = {**stack.env, "HOOKYARD_API_KEY": answer["api_token"], "HOOKYARD_DATA_DIR": str(tmp_path / "cli")}
    return answer, env


def test_trigger_tail_and_replay_work_with_the_token_api_start_gave(
    shared_stack: Stack, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    started, env = _start(shared_stack, tmp_path)
    ep = started["endpoint_id"]
    tail = Proc(["tail"], env, tmp_path / "tail.log")  # every endpoint of the token's account: the one it has
    procs.append(tail)
    tail.wait_for_output("Following 1 endpoint")

    sent = ok(cli(env, "trigger", "stripe", "payment_intent.succeeded"))  # no endpoint named: the account's only
    event_id = re.fullmatch(rf"sent payments payment_intent\.succeeded to {ep}: 200, (evt_\w+)\n", sent).group(1)
    tail.wait_for_output(rf"event .*{ep}  payments  +payment_intent\.succeeded .* POST verified  {event_id}")

    replayed = ok(cli(env, "replay", "--to", destination.url, "--resign-with", RESIGN))  # the latest event
    done = rf"replayed {event_id} to {re.escape(destination.url)}, re-signed: 200, \d+ ms \(dlv_\w+\)\n"
    assert re.fullmatch(done, replayed), replayed
    (request,) = destination.requests
    stripe.WebhookSignature.verify_header(request.body.decode(), request.headers["stripe-signature"], RESIGN)
    tail.wait_for_output(rf"delivery .*{ep}  replay .*{re.escape(destination.url)} .*→ 200 .*{event_id}$")
    assert tail.interrupt() == 0
    assert "Traceback" not in tail.output

    link = ok(cli(env, "open", "--no-browser")).strip()  # no endpoint named, no listen run: the only one
    assert link.startswith(f"{shared_stack.control_url}/inbox/{ep}?link=acct_"), link
    assert httpx.get(link, follow_redirects=False).status_code == 303


def test_listen_follows_the_token_endpoint_and_replay_goes_where_it_forwards(
    shared_stack: Stack, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    started, env = _start(shared_stack, tmp_path)
    ep = started["endpoint_id"]
    listen = Proc(["listen", ep, "--forward-to", destination.url], env, tmp_path / "listen.log")
    procs.append(listen)
    listen.wait_for_output(f"Ready. Send webhooks to {re.escape(started['ingest_url'])} \\(endpoint {ep}\\)")
    ack = httpx.post(started["ingest_url"], json={"type": "order.placed", "n": 1}, timeout=30)
    assert ack.status_code == 200, ack.text
    event_id = ack.json()["id"]
    listen.wait_for_output(rf"→ 200 .*{event_id}")
    until(lambda: len(destination.requests) == 1, what="the forward")
    assert listen.interrupt() == 0

    # replay with no flag: listen's endpoint, its latest event, to where listen forwarded
    replayed = ok(cli(env, "replay"))
    assert replayed.startswith(f"replayed {event_id} to {destination.url}: 200")
    until(lambda: len(destination.requests) == 2, what="the replay")
    assert [r.body for r in destination.requests] == [b'{"type":"order.placed","n":1}'] * 2


def test_what_the_token_cannot_do_is_refused_saying_what_instead(shared_stack: Stack, tmp_path: Path) -> None:
    started, env = _start(shared_stack, tmp_path)
    refused = cli(env, "listen", "--start", "--forward-to", "http://127.0.0.1:9/hooks")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("hookyard: listen --start: a temporary hy_tmp_ token cannot create endpoints")
    assert f"`hookyard listen {started['endpoint_id']} --forward-to URL`" in refused.stderr
    assert "POST /api/register" in refused.stderr
    assert refused.stderr.rstrip().endswith("whose hy_live_ key can create endpoints")
    assert len(refused.stderr.strip().splitlines()) == 1

    unknown = cli({**env, "HOOKYARD_API_KEY": "hy_tmp_" + "a" * 32}, "trigger", "stripe")
    assert unknown.returncode == 1
    # the control plane's own answer (before any tool runs), not "cannot reach the control plane"
    assert unknown.stderr == "hookyard: API key is invalid, revoked or expired (401 unauthorized)\n"
    away = cli(env, "trigger", "stripe", "--control-url", f"http://127.0.0.1:{free_port()}")
    assert away.returncode == 1
    # the error inside the MCP client's task group, not "ExceptionGroup: unhandled errors in a TaskGroup"
    said = r"hookyard: cannot reach the control plane at .*: MCP list_endpoints: ConnectError: .*\n"
    assert re.fullmatch(said, away.stderr), away.stderr


async def test_an_endpoint_of_the_other_key_says_which_key_looked_and_which_to_give(
    shared_stack: Stack, module_settings: Settings, tmp_path: Path
) -> None:
    """A first-hour user holds two keys: ``hookyard up``'s hy_live_ key, saved in the data dir, and the
    hy_tmp_ token /api/start answered. Each finds only its own account's endpoints; a bare "not found" sent
    them looking for a typo, so the message names the key used and the one to give."""
    started, token_env = _start(shared_stack, tmp_path)
    token_ep = started["endpoint_id"]
    account = await make_account(module_settings.database_url)
    made = httpx.post(f"{shared_stack.control_url}/v1/endpoints", json={"name": "mine"}, headers=account.headers)
    live_ep = made.json()["id"]
    data_dir = tmp_path / "up"
    data_dir.mkdir()
    (data_dir / "api_key").write_text(account.key + "\n")
    saved_env = {k: v for k, v in token_env.items() if k != "HOOKYARD_API_KEY"} | {"HOOKYARD_DATA_DIR": str(data_dir)}

    saved = f"the key used is the one `hookyard up` saved in {data_dir / 'api_key'}"
    for args in (("trigger", "stripe", "--endpoint", token_ep), ("open", token_ep, "--no-browser")):
        refused = cli(saved_env, *args)
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.startswith(f"hookyard: endpoint '{token_ep}' not found (404 not_found); {saved}, "), (
            refused.stderr
        )
        assert refused.stderr.rstrip().endswith(
            "one POST /api/start made is its hy_tmp_ token's: give that token as HOOKYARD_API_KEY"
        )
        assert len(refused.stderr.strip().splitlines()) == 1

    refused = cli(token_env, "replay", "--endpoint", live_ep, "--to", "http://127.0.0.1:9/x")
    assert refused.returncode == 1, refused.stderr
    assert f"'{live_ep}'" in refused.stderr
    assert (
        "; the key used is HOOKYARD_API_KEY's, a hy_tmp_ token, which finds only the endpoint POST /api/start "
        "made for it" in refused.stderr
    )
    assert len(refused.stderr.strip().splitlines()) == 1
