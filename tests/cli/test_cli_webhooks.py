"""``hookyard listen``, ``trigger``, ``tail`` and ``up``'s activity lines, as a user runs them: real edge,
control and worker processes (``tests.stack``), the CLI as a subprocess, a real loopback destination.

The listen ledger sends numbered events through the edge while the control plane is killed and restarted
and while ``listen`` itself is stopped and started again, and checks the destination got each number
exactly once. Signatures are checked with the official libraries (stripe, svix, standardwebhooks)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import io
import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
import stripe
import svix

from control.cli.listen import tail
from control.cli.remote import Remote
from control.workers import activity
from shared.keys import Keys
from shared.samples import sample
from shared.settings import Settings
from tests.conftest import make_account
from tests.destination import Destination, Reply
from tests.events_support import Ev, store, store_delivery
from tests.helpers import (
    db,
    module_settings_fixture,  # noqa: F401 - the fixture module_settings
    redis_client,
)
from tests.stack import Stack, _hookyard, free_port

pytestmark = pytest.mark.slow

PROVIDER_SECRET = "whsec_" + base64.b64encode(b"provider-secret-for-the-cli-tests").decode()
RESIGN = "whsec_" + base64.b64encode(b"the-local-apps-own-secret-32byte").decode()


class Proc:
    """A hookyard command in its own session, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [*_hookyard(), *args], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait_for_output(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output)
            if found:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not in the output of {self.proc.args}:\n{self.output}")

    def interrupt(self) -> int:
        """Ctrl-C: the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.kill()


def _until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


@pytest.fixture(scope="module")
def shared_stack(module_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One edge, control and worker for the module's tests, which each use their own account and endpoints."""
    stack = Stack(module_settings, tmp_path_factory.mktemp("cli-webhooks"))
    try:
        stack.start_edge()
        stack.start_control()
        stack.env["HOOKYARD_LOG_ACTIVITY"] = "true"  # the worker's log says what it stored and delivered
        stack.start_worker()
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture
async def running(
    shared_stack: Stack, module_settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[Stack, dict[str, str], httpx.Client]]:
    if "control" not in shared_stack.procs:  # a test that restarts it failed before it could
        shared_stack.start_control()
    account = await make_account(module_settings.database_url)
    env = {**shared_stack.env, "HOOKYARD_API_KEY": account.key, "HOOKYARD_DATA_DIR": str(tmp_path / "cli")}
    with httpx.Client(base_url=shared_stack.control_url, headers=account.headers, timeout=30) as api:
        yield shared_stack, env, api


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_hookyard(), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def _numbers(destination: Destination) -> list[int]:
    return sorted(json.loads(r.body)["n"] for r in destination.requests)


def test_listen_forwards_every_event_once_across_control_and_own_restarts(
    running, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    stack, env, api = running
    endpoint = api.post("/v1/endpoints", json={"name": "ledger"}).json()

    def send(numbers: range) -> None:
        for n in numbers:
            ack = httpx.post(endpoint["ingest_url"], json={"n": n})
            assert ack.status_code == 200, ack.text

    def listen() -> Proc:
        proc = Proc(["listen", endpoint["id"], "--forward-to", destination.url], env, tmp_path / "listen.log")
        procs.append(proc)
        return proc

    first = listen()
    first.wait_for_output("Forwarding to .*new events from now")
    send(range(10))
    stored = f"/v1/endpoints/{endpoint['id']}/events"
    _until(lambda: len(api.get(stored, params={"limit": 100}).json()["events"]) == 10, what="the first 10 stored")
    _until(lambda: len(destination.requests) >= 10, what="the first 10 forwarded")
    stack.kill("control")  # SIGKILL, with listen's long poll in flight
    send(range(10, 20))  # stored by the worker meanwhile
    first.wait_for_output("cannot reach the control plane at .*retrying")
    stack.start_control()
    _until(lambda: len(destination.requests) >= 20, what="the events sent while control was down")
    assert first.interrupt() == 0
    assert first.output.rstrip().endswith("stopped")
    send(range(20, 30))  # while nobody listens
    second = listen()
    second.wait_for_output("resuming after the last event forwarded")
    send(range(30, 40))
    _until(lambda: len(api.get(stored, params={"limit": 100}).json()["events"]) == 40, what="all 40 stored")
    # A sentinel, stored after all 40: listen forwards in stored order, one at a time, so a duplicate of any
    # of them would reach the destination before it does.
    send(range(40, 41))
    _until(lambda: 40 in _numbers(destination), what="the sentinel sent after all 40")
    assert _numbers(destination) == list(range(41))  # each exactly once
    # listen prints an event's line once the destination has answered, so the sentinel's may come a moment after
    # the destination has it (a suite run read the log first and found 40).
    forwarded = re.compile(r"^\d\d:\d\d:\d\d  .* → 200 .* ms  (evt_\w+)$", re.MULTILINE)
    _until(lambda: len(forwarded.findall(second.output)) >= 41, what="a line for the sentinel")
    lines = forwarded.findall(second.output)
    assert len(lines) == 41 == len(set(lines))  # one line per event, across both runs (same log file)
    assert second.interrupt() == 0


def _relay_as(prefix: str, headers: dict[str, str]) -> dict[str, str]:
    """The identity scheme's relay-* headers under the names a library reads."""
    return {f"{prefix}-{part}": headers[f"relay-{part}"] for part in ("id", "timestamp", "signature")}


def test_listen_says_once_when_its_target_looks_wrong(
    running, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    """Another program on the port (it answers 404 and names itself), then nothing on it: one hint line per
    run, naming what answered and how to send the event again; every event is still forwarded and printed."""
    _stack, env, api = running
    endpoint = api.post("/v1/endpoints", json={"name": "wrong target"}).json()
    destination.reply(default=Reply(status=404, body=b"Cannot POST /hook", headers={"server": "other-app/1.0"}))
    wrong = Proc(["listen", endpoint["id"], "--forward-to", destination.url], env, tmp_path / "wrong.log")
    procs.append(wrong)
    wrong.wait_for_output("Forwarding to")
    acked = [httpx.post(endpoint["ingest_url"], json={"n": n}).json()["id"] for n in range(2)]
    _until(lambda: len(re.findall(r"→ 404", wrong.output)) == 2, what="both forwards answered 404")
    hints = re.findall(r"^  hint: .*$", wrong.output, re.MULTILINE)
    assert hints == [
        f"  hint: {destination.url} answered 404 from 'other-app/1.0': is that your app, and does it take POST at "
        f"that path? (`hookyard replay {acked[0]} --to URL` sends it again)"
    ]
    assert wrong.interrupt() == 0

    # the instance named by flag this time: the hint's command carries the flag, and works as printed
    nowhere, data_dir = f"http://127.0.0.1:{free_port()}/hook", env["HOOKYARD_DATA_DIR"]
    args = ["listen", endpoint["id"], "--forward-to", nowhere, "--data-dir", data_dir]
    refused = Proc(args, env, tmp_path / "refused.log")
    procs.append(refused)
    refused.wait_for_output("Forwarding to")
    third = httpx.post(endpoint["ingest_url"], json={"n": 2}).json()["id"]
    refused.wait_for_output(re.escape(third))
    assert re.findall(r"^  hint: .*$", refused.output, re.MULTILINE) == [
        f"  hint: nothing is listening at {nowhere}; start your app there (`hookyard replay {third} --to URL "
        f"--data-dir {data_dir}` sends it again)"
    ]
    assert refused.interrupt() == 0
    destination.reply(default=Reply())
    command = re.search(r"`hookyard (replay [^`]+)`", refused.output).group(1).replace("URL", destination.url)
    without = {k: v for k, v in env.items() if k != "HOOKYARD_DATA_DIR"}
    sent = _cli(without, *command.split())
    assert sent.returncode == 0, sent.stderr
    assert json.loads(destination.requests[-1].body) == {"n": 2}


def test_listen_start_filters_event_types_and_resigns(
    running, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    _stack, env, api = running
    proc = Proc(
        [
            "listen",
            "--start",
            "--forward-to",
            destination.url,
            "--events",
            "invoice.paid,user.created",
            "--resign-with",
            RESIGN,
        ],
        env,
        tmp_path / "start.log",
    )
    procs.append(proc)
    ingest_url = proc.wait_for_output(r"Send webhooks to (\S+)").group(1)
    endpoint_id = proc.wait_for_output(r"endpoint (ep_\w+) \(temporary").group(1)
    assert api.get(f"/v1/endpoints/{endpoint_id}").json()["temporary"] is True
    proc.wait_for_output("Forwarding to")
    sent, acked = {}, {}
    for provider, event_type in (
        ("payments", "charge.refunded"),
        ("payments", "invoice.paid"),
        ("identity", "user.created"),
    ):
        webhook = sample(provider, event_type, secret=PROVIDER_SECRET)
        ack = httpx.post(ingest_url, content=webhook.body, headers=webhook.headers)
        assert ack.status_code == 200, ack.text
        sent[event_type], acked[event_type] = webhook, ack.json()["id"]
    refunded = f"/v1/events/{acked['charge.refunded']}"
    _until(lambda: api.get(refunded).status_code == 200, what="charge.refunded stored")
    # A sentinel of a listed type, stored after charge.refunded: listen goes through the events in stored order,
    # so once the sentinel is forwarded, charge.refunded was passed over, not merely not reached yet.
    sentinel = sample("identity", "user.created", secret=PROVIDER_SECRET)
    assert httpx.post(ingest_url, content=sentinel.body, headers=sentinel.headers).status_code == 200
    _until(lambda: len(destination.requests) >= 3, what="the two events of the listed types and the sentinel")
    paid, created, last = destination.requests
    assert len(destination.requests) == 3
    assert last.headers["relay-id"] == sentinel.headers["relay-id"]
    assert json.loads(paid.body)["type"] == "invoice.paid"
    stripe.WebhookSignature.verify_header(paid.body.decode(), paid.headers["pay-signature"], RESIGN, tolerance=300)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(paid.body.decode(), paid.headers["pay-signature"], PROVIDER_SECRET)
    assert created.headers["relay-id"] == sent["user.created"].headers["relay-id"]  # its own idempotency id
    standardwebhooks.Webhook(RESIGN).verify(created.body, _relay_as("webhook", created.headers))
    svix.Webhook(RESIGN).verify(created.body, _relay_as("svix", created.headers))
    assert proc.interrupt() == 0
    assert len(re.findall(r"→ 200", proc.output)) == 3


def _verify_sample(provider: str, event: dict[str, Any]) -> None:
    body, headers = event["body"].encode(), event["headers"]
    if provider == "payments":
        stripe.WebhookSignature.verify_header(event["body"], headers["pay-signature"], PROVIDER_SECRET, tolerance=300)
    elif provider == "identity":
        standardwebhooks.Webhook(PROVIDER_SECRET).verify(body, _relay_as("webhook", headers))
        svix.Webhook(PROVIDER_SECRET).verify(body, _relay_as("svix", headers))
    elif provider == "commerce":  # the platform's published rule: base64 HMAC-SHA256 of the body
        mac = hmac.new(PROVIDER_SECRET.encode(), body, hashlib.sha256).digest()
        assert headers["x-shop-hmac-sha256"] == base64.b64encode(mac).decode()
    else:
        mac = hmac.new(PROVIDER_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["x-codehost-signature-256"] == f"sha256={mac}"


def test_trigger_sends_each_providers_signed_sample(running) -> None:
    _stack, env, api = running
    endpoint = api.post("/v1/endpoints", json={"name": "trigger", "external_ref": "cli-trigger"}).json()
    config = {"hmac_enabled": True, "secret": PROVIDER_SECRET, "on_failure": "reject"}
    assert api.patch(f"/v1/endpoints/{endpoint['id']}/auth-config", json=config).status_code == 200
    for provider, event_type in (
        ("payments", "payment_intent.succeeded"),
        ("identity", "user.created"),
        ("commerce", "orders/paid"),
        ("code_host", "push"),
    ):
        done = _cli(env, "trigger", provider, event_type, "--endpoint", "cli-trigger", "--headers", "neutral")
        assert done.returncode == 0, done.stderr
        event_id = re.search(r"sent .*: 200, (evt_\w+)$", done.stdout.strip()).group(1)
        event = _until(
            lambda e=event_id: (r := api.get(f"/v1/events/{e}")).status_code == 200 and r.json(), what=event_id
        )
        assert (event["provider"], event["event_type"], event["signature_valid"]) == (provider, event_type, True)
        _verify_sample(provider, event)
    wrong = _cli(env, "trigger", "payments", "orders/paid", "--endpoint", endpoint["id"])
    assert wrong.returncode == 1
    assert "event_type" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_tail_prints_a_line_per_event_and_per_delivery(
    running, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    _stack, env, api = running
    endpoint = api.post("/v1/endpoints", json={"name": "tailed"}).json()
    api.post(f"/v1/endpoints/{endpoint['id']}/destinations", json={"url": destination.url, "forward_all": True})
    proc = Proc(["tail", endpoint["id"]], env, tmp_path / "tail.log")
    procs.append(proc)
    proc.wait_for_output("Following 1 endpoint")  # said once tail knows where "now" is
    webhook = sample("payments", "invoice.paid", secret=PROVIDER_SECRET)
    event_id = httpx.post(endpoint["ingest_url"], content=webhook.body, headers=webhook.headers).json()["id"]
    proc.wait_for_output(rf"event .*{endpoint['id']}  payments  +invoice\.paid .* POST not checked  {event_id}")
    proc.wait_for_output(rf"delivery .*rule .*{re.escape(destination.url)} .*→ 200 .*attempt 1  {event_id}")
    assert proc.interrupt() == 0


def test_version_and_a_temporary_token_are_answered_plainly(running) -> None:
    _stack, env, _api = running
    version = _cli(env, "--version")
    assert re.fullmatch(r"hookyard \S+\n", version.stdout)
    refused = _cli(
        {**env, "HOOKYARD_API_KEY": "hy_tmp_" + "a" * 32}, "trigger", "payments", "invoice.paid", "--endpoint", "x"
    )
    assert refused.returncode == 2
    assert "hy_tmp_" in refused.stderr
    assert "Traceback" not in refused.stderr
    gone = _cli(
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
    running = asyncio.create_task(tail(remote, endpoint_ref=endpoint_id, stream=out))
    loop = asyncio.get_running_loop()
    try:
        deadline = loop.time() + 20
        while not ("at.following" in out.getvalue() and f"attempt 1  {now.id}" in out.getvalue()):
            assert not running.done(), out.getvalue()
            assert loop.time() < deadline, f"what happened at 'Following' was not printed:\n{out.getvalue()}"
            await asyncio.sleep(0.05)
    finally:
        if not running.done():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, caught by tail's handler on this loop
        code = await asyncio.wait_for(running, 30)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await remote.aclose()
    assert code == 0
    assert out.getvalue().endswith("stopped\n")
    assert before.id not in out.getvalue()


async def _store_with_attempt(settings: Settings, event: Ev) -> None:
    """The event stored and announced as the flush does, and one delivery attempt of it."""
    async with db(settings.database_url) as conn, redis_client(settings.redis_url) as redis:
        await store(conn, redis, Keys(settings.redis_prefix), [event])
        await store_delivery(conn, event.endpoint_id, event.id, created_at=datetime.now(UTC))
