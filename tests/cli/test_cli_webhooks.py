"""``hookyard trigger``, ``tail`` and ``up``'s activity lines, as a user runs them: real edge, control and worker
processes (``tests.stack``), the CLI as a subprocess, a real loopback destination (``listen``:
``test_cli_listen.py``). Signatures are checked with the official libraries (stripe, svix, standardwebhooks)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import io
import logging
import re
import threading
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
import stripe
import svix

from control.cli.remote import Remote
from control.cli.tail import tail
from control.db.migrate import available
from control.support import activity
from shared.keys import Keys
from shared.samples import sample
from shared.settings import Settings
from tests.cli.webhooks_support import PROVIDER_SECRET, interrupted, relay_as
from tests.conftest import make_account
from tests.destination import Destination
from tests.events_support import Ev, store, store_delivery
from tests.helpers import (
    db,
    redis_client,
)
from tests.onboarding.clirun import Proc, cli, until
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow


def _verify_sample(provider: str, event: dict[str, Any]) -> None:
    body, headers = event["body"].encode(), event["headers"]
    if provider == "payments":
        stripe.WebhookSignature.verify_header(event["body"], headers["pay-signature"], PROVIDER_SECRET, tolerance=300)
    elif provider == "identity":
        standardwebhooks.Webhook(PROVIDER_SECRET).verify(body, relay_as("webhook", headers))
        svix.Webhook(PROVIDER_SECRET).verify(body, relay_as("svix", headers))
    elif provider == "commerce":  # the platform's published rule: base64 HMAC-SHA256 of the body
        mac = hmac.new(PROVIDER_SECRET.encode(), body, hashlib.sha256).digest()
        assert headers["x-shop-hmac-sha256"] == base64.b64encode(mac).decode()
    else:
        mac = hmac.new(PROVIDER_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["x-codehost-signature-256"] == f"sha256={mac}"


def test_trigger_sends_each_providers_signed_sample(stack_cli_and_api) -> None:
    _stack, env, api = stack_cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "trigger", "external_ref": "cli-trigger"}).json()
    config = {"hmac_enabled": True, "secret": PROVIDER_SECRET, "on_failure": "reject"}
    assert api.patch(f"/v1/endpoints/{endpoint['id']}/auth-config", json=config).status_code == 200
    for provider, event_type in (
        ("payments", "payment_intent.succeeded"),
        ("identity", "user.created"),
        ("commerce", "orders/paid"),
        ("code_host", "push"),
    ):
        done = cli(env, "trigger", provider, event_type, "--endpoint", "cli-trigger", "--headers", "neutral")
        assert done.returncode == 0, done.stderr
        event_id = re.search(r"sent .*: 200, (evt_\w+)$", done.stdout.strip()).group(1)
        event = until(
            lambda e=event_id: (r := api.get(f"/v1/events/{e}")).status_code == 200 and r.json(), what=event_id
        )
        assert (event["provider"], event["event_type"], event["signature_valid"]) == (provider, event_type, True)
        _verify_sample(provider, event)
    wrong = cli(env, "trigger", "payments", "orders/paid", "--endpoint", endpoint["id"])
    assert wrong.returncode == 1
    assert "event_type" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_tail_prints_a_line_per_event_and_per_delivery(
    stack_cli_and_api, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    _stack, env, api = stack_cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "tailed"}).json()
    created = {"url": destination.url, "forward_all": True, "deduplicate_window_s": 3600}
    api.post(f"/v1/endpoints/{endpoint['id']}/destinations", json=created)
    proc = Proc(["tail", endpoint["id"]], env, tmp_path / "tail.log")
    procs.append(proc)
    proc.wait_for_output("Following 1 endpoint")  # said once tail knows where "now" is
    webhook = sample("payments", "invoice.paid", secret=PROVIDER_SECRET)
    event_id = httpx.post(endpoint["ingest_url"], content=webhook.body, headers=webhook.headers).json()["id"]
    proc.wait_for_output(rf"event .*{endpoint['id']}  payments  +invoice\.paid .* POST not checked  {event_id}")
    proc.wait_for_output(rf"delivery .*rule .*{re.escape(destination.url)} .*→ 200 .*attempt 1  {event_id}")
    # The provider sends it again: not sent, and not an error either (it printed "ERR" before).
    again = httpx.post(endpoint["ingest_url"], content=webhook.body, headers=webhook.headers).json()["id"]
    proc.wait_for_output(rf"delivery .*rule .*→ skipped, duplicate of {event_id}  {again}$")
    assert "ERR" not in proc.output
    assert proc.interrupt() == 0


def test_version_and_an_unreachable_control_plane_are_answered_plainly(stack_cli_and_api) -> None:
    """(A temporary token is taken, over MCP: test_cli_temporary_token.py.)"""
    _stack, env, _api = stack_cli_and_api
    version = cli(env, "--version")
    assert version.stdout == f"hookyard {metadata.version('hookyard')} (schema {available()[-1][0]})\n"
    gone = cli(
        {**env, "HOOKYARD_CONTROL_PORT": str(free_port())}, "trigger", "payments", "invoice.paid", "--endpoint", "x"
    )
    assert gone.returncode == 1
    assert "cannot reach the control plane at" in gone.stderr


def test_up_prints_a_line_per_event_and_per_delivery(
    stack: Stack, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    env = {k: v for k, v in stack.env.items() if k != "HOOKYARD_FLUSH_CLAIM_IDLE_MS"}
    up = Proc(["up", "--data-dir", str(tmp_path / "data")], env, tmp_path / "up.log")
    procs.append(up)
    up.wait_for_output("hookyard is up", timeout=90)
    key = (tmp_path / "data" / "api_key").read_text().strip()
    with httpx.Client(base_url=stack.control_url, headers={"authorization": f"Bearer {key}"}, timeout=30) as api:
        endpoint = api.post("/v1/endpoints", json={"name": "up"}).json()
        created = api.post(
            f"/v1/endpoints/{endpoint['id']}/destinations", json={"url": destination.url, "forward_all": True}
        ).json()
    webhook = sample("payments", "invoice.paid", secret=PROVIDER_SECRET)
    event_id = httpx.post(endpoint["ingest_url"], content=webhook.body, headers=webhook.headers).json()["id"]
    ep = endpoint["id"]
    stored = rf"INFO hookyard\.activity: event +{event_id}  {ep}  payments invoice\.paid  POST /  not checked"
    up.wait_for_output(stored)
    # The destination by id and origin: its path and query (a webhook URL's usual secret) are not logged.
    where = f"{created['id']} http://127.0.0.1:{destination.port}"
    up.wait_for_output(rf"INFO hookyard\.activity: delivery +{event_id}  -> {re.escape(where)}  200 in")
    assert up.interrupt() == 0


def test_the_activity_lines_are_info_lines() -> None:
    """HOOKYARD_LOG_LEVEL=warning silences them; log_activity off (production's default) too."""
    logger = logging.getLogger("hookyard.activity")
    before = logger.level
    try:
        logger.setLevel(logging.WARNING)
        assert not activity.enabled(True)
        logger.setLevel(logging.INFO)
        assert activity.enabled(True)
        assert not activity.enabled(False)
    finally:
        logger.setLevel(before)


async def test_tail_prints_what_happens_the_moment_it_says_following(
    shared_stack: Stack, module_settings: Settings
) -> None:
    """An event and a delivery attempt stored from inside the write of the "Following" line, so at the
    earliest moment a user could act on it, are both printed: tail asked where "now" is and which attempts
    were already listed before saying so."""
    stack, settings = shared_stack, module_settings
    if "control" not in stack.procs:
        stack.start_control()
    account = await make_account(settings.database_url)
    with httpx.Client(base_url=stack.control_url, headers=account.headers, timeout=30) as api:
        endpoint_id = api.post("/v1/endpoints", json={"name": "tailed"}).json()["id"]
    before = Ev(endpoint_id, event_type="before.start")
    await _store_with_attempt(settings, before)  # already there: printed by neither poller
    now = Ev(endpoint_id, event_type="at.following")

    class Terminal(io.StringIO):
        def write(self, text: str) -> int:
            if text.startswith("Following"):  # tail is blocked in this call until both rows are committed
                writer = threading.Thread(target=asyncio.run, args=(_store_with_attempt(settings, now),))
                writer.start()
                writer.join()
            return super().write(text)

    out = Terminal()
    remote = Remote(stack.control_url, account.key)
    tailing = asyncio.create_task(tail(remote, endpoint_ref=endpoint_id, stream=out))
    loop = asyncio.get_running_loop()
    try:
        deadline = loop.time() + 20
        while not ("at.following" in out.getvalue() and f"attempt 1  {now.id}" in out.getvalue()):
            assert not tailing.done(), out.getvalue()
            assert loop.time() < deadline, f"what happened at 'Following' was not printed:\n{out.getvalue()}"
            await asyncio.sleep(0.05)
    finally:
        code = await interrupted(tailing, remote)
    assert code == 0
    assert out.getvalue().endswith("stopped\n")
    assert before.id not in out.getvalue()


async def _store_with_attempt(settings: Settings, event: Ev) -> None:
    """The event stored and announced as the flush does, and one delivery attempt of it."""
    async with db(settings.database_url) as conn, redis_client(settings.redis_url) as redis:
        await store(conn, redis, Keys(settings.redis_prefix), [event])
        await store_delivery(conn, event.endpoint_id, event.id, created_at=datetime.now(UTC))
