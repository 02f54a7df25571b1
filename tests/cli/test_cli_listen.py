"""``hookyard listen`` as a user runs it: real edge, control and worker processes (``tests.stack``), the CLI as a
subprocess, a real loopback destination.

The ledger sends numbered events through the edge while the control plane is killed and restarted and while
``listen`` itself is stopped and started again, and checks the destination got each number exactly once.
Re-signed forwards are checked with the official libraries (stripe, svix, standardwebhooks)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import standardwebhooks
import stripe
import svix

from control.cli.forward import Forwarded, hint
from control.support.client_tls import trust_none
from shared.samples import sample
from tests.cli.webhooks_support import PROVIDER_SECRET, RESIGN, relay_as
from tests.destination import Destination, Reply, serving
from tests.onboarding.clirun import Proc, cli, until
from tests.stack import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def ingest() -> Iterator[httpx.Client]:
    """One client for a test's sends to the edge (plain HTTP here): ``httpx.post`` made a client per call, its
    TLS context loading the CA bundle each time (docs/adr/0043-suite-scheduling.md)."""
    with httpx.Client(trust_env=False, verify=trust_none()) as client:
        yield client


def _numbers(destination: Destination) -> list[int]:
    return sorted(json.loads(r.body)["n"] for r in destination.requests)


def test_listen_forwards_every_event_once_across_control_and_own_restarts(
    stack_cli_and_api, destination: Destination, procs: list[Proc], tmp_path: Path, ingest: httpx.Client
) -> None:
    stack, env, api = stack_cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "ledger"}).json()

    def send(numbers: range) -> None:
        for n in numbers:
            ack = ingest.post(endpoint["ingest_url"], json={"n": n})
            assert ack.status_code == 200, ack.text

    def listen() -> Proc:
        proc = Proc(["listen", endpoint["id"], "--forward-to", destination.url], env, tmp_path / "listen.log")
        procs.append(proc)
        return proc

    first = listen()
    first.wait_for_output("Forwarding to .*new events from now")
    send(range(10))
    stored = f"/v1/endpoints/{endpoint['id']}/events"
    until(lambda: len(api.get(stored, params={"limit": 100}).json()["events"]) == 10, what="the first 10 stored")
    until(lambda: len(destination.requests) >= 10, what="the first 10 forwarded")
    stack.kill("control")  # SIGKILL, with listen's long poll in flight
    send(range(10, 20))  # stored by the worker meanwhile
    first.wait_for_output("cannot reach the control plane at .*retrying")
    stack.start_control()
    until(lambda: len(destination.requests) >= 20, what="the events sent while control was down")
    assert first.interrupt() == 0
    assert first.output.rstrip().endswith("stopped")
    send(range(20, 30))  # while nobody listens
    second = listen()
    second.wait_for_output("resuming after the last event forwarded")
    send(range(30, 40))
    until(lambda: len(api.get(stored, params={"limit": 100}).json()["events"]) == 40, what="all 40 stored")
    # A sentinel, stored after all 40: listen forwards in stored order, one at a time, so a duplicate of any
    # of them would reach the destination before it does.
    send(range(40, 41))
    until(lambda: 40 in _numbers(destination), what="the sentinel sent after all 40")
    assert _numbers(destination) == list(range(41))  # each exactly once
    # listen prints an event's line once the destination has answered, so the sentinel's may come a moment after
    # the destination has it (a suite run read the log first and found 40).
    forwarded = re.compile(r"^\d\d:\d\d:\d\d  .* → 200 .* ms  (evt_\w+)$", re.MULTILINE)
    until(lambda: len(forwarded.findall(second.output)) >= 41, what="a line for the sentinel")
    lines = forwarded.findall(second.output)
    assert len(lines) == 41 == len(set(lines))  # one line per event, across both runs (same log file)
    assert second.interrupt() == 0


def test_listen_forwards_the_captured_headers_and_adds_none_of_its_clients(
    stack_cli_and_api, destination: Destination, procs: list[Proc], tmp_path: Path
) -> None:
    """A provider that sends few headers: the app gets those (and the Host and Content-Length every request
    has), not the forwarding client's defaults, and the recorded forward lists exactly what the app got."""
    _stack, env, api = stack_cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "few headers"}).json()
    proc = Proc(["listen", endpoint["id"], "--forward-to", destination.url], env, tmp_path / "listen.log")
    procs.append(proc)
    proc.wait_for_output("Forwarding to")
    with httpx.Client() as provider:
        for name in list(provider.headers):  # the sender's own defaults off: only what is named here goes out
            del provider.headers[name]
        ack = provider.post(endpoint["ingest_url"], content=b'{"n": 1}', headers={"content-type": "application/json"})
    assert ack.status_code == 200, ack.text
    until(lambda: len(destination.requests) == 1, what="the event forwarded")
    (got,) = destination.requests
    assert set(got.headers) == {"host", "content-length", "content-type"}, got.headers

    def recorded() -> dict[str, str] | None:
        found = api.get(f"/v1/events/{ack.json()['id']}").json()["deliveries"]
        return found[0]["request_headers"] if found else None

    until(lambda: recorded() is not None, what="the forward recorded on its event")
    assert recorded() == {"content-type": "application/json"}
    assert proc.interrupt() == 0


def test_listen_says_once_when_its_target_looks_wrong(
    stack_cli_and_api, destination: Destination, procs: list[Proc], tmp_path: Path, ingest: httpx.Client
) -> None:
    """Another program on the port (it answers 404 and names itself), then nothing on it: one hint line per
    run, naming what answered and how to send the event again; every event is still forwarded and printed."""
    _stack, env, api = stack_cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "wrong target"}).json()
    destination.reply(default=Reply(status=404, body=b"Cannot POST /hook", headers={"server": "other-app/1.0"}))
    wrong = Proc(["listen", endpoint["id"], "--forward-to", destination.url], env, tmp_path / "wrong.log")
    procs.append(wrong)
    wrong.wait_for_output("Forwarding to")
    acked = [ingest.post(endpoint["ingest_url"], json={"n": n}).json()["id"] for n in range(2)]
    until(lambda: len(re.findall(r"→ 404", wrong.output)) == 2, what="both forwards answered 404")
    hints = re.findall(r"^  hint: .*$", wrong.output, re.MULTILINE)
    # One hint, for whichever forward answered first: two events sent back to back on one connection are
    # delivered in either order (no FIFO key), so either may be the one named.
    assert len(hints) == 1, hints
    assert hints[0] in {
        f"  hint: {destination.url} answered 404 from 'other-app/1.0': is that your app, and does it take POST at "
        f"that path? (`hookyard replay {event} --to {destination.url}` sends it again)"
        for event in acked
    }
    assert wrong.interrupt() == 0

    # the instance named by flag this time: the hint's command carries the flag, and works as printed
    nowhere, data_dir = f"http://127.0.0.1:{free_port()}/hook", env["HOOKYARD_DATA_DIR"]
    args = ["listen", endpoint["id"], "--forward-to", nowhere, "--data-dir", data_dir]
    refused = Proc(args, env, tmp_path / "refused.log")
    procs.append(refused)
    refused.wait_for_output("Forwarding to")
    third = ingest.post(endpoint["ingest_url"], json={"n": 2}).json()["id"]
    refused.wait_for_output(re.escape(third))
    assert re.findall(r"^  hint: .*$", refused.output, re.MULTILINE) == [
        f"  hint: nothing is listening at {nowhere}; start your app there (`hookyard replay {third} --to {nowhere} "
        f"--data-dir {data_dir}` sends it again)"
    ]
    assert refused.interrupt() == 0
    destination.reply(default=Reply())
    command = re.search(r"`hookyard (replay [^`]+)`", refused.output).group(1).replace(nowhere, destination.url)
    without = {k: v for k, v in env.items() if k != "HOOKYARD_DATA_DIR"}
    sent = cli(without, *command.split())
    assert sent.returncode == 0, sent.stderr
    assert json.loads(destination.requests[-1].body) == {"n": 2}


def test_listen_hints_once_per_kind_of_wrong_target(
    stack_cli_and_api, procs: list[Proc], tmp_path: Path, ingest: httpx.Client
) -> None:
    """Another program on the port, then nothing on it, in one run: each says so once (the first hint used to
    be the run's only one, so the second kind was never told)."""
    _stack, env, api = stack_cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "two wrong targets"}).json()
    with serving() as other:
        other.reply(default=Reply(status=501, headers={"server": "SimpleHTTP/0.6"}))
        proc = Proc(["listen", endpoint["id"], "--forward-to", other.url], env, tmp_path / "listen.log")
        procs.append(proc)
        proc.wait_for_output("Forwarding to")
        for n in range(2):
            ingest.post(endpoint["ingest_url"], json={"n": n})
        until(lambda: len(re.findall(r"→ 501", proc.output)) == 2, what="both forwards answered 501")
    for n in range(2, 4):  # the server is gone now: nothing listens on its port
        ingest.post(endpoint["ingest_url"], json={"n": n})
    until(lambda: len(re.findall(r"→ ERR ConnectError", proc.output)) == 2, what="both forwards refused")
    hints = re.findall(r"^  hint: (.*?answered 501|nothing is listening)", proc.output, re.MULTILINE)
    assert hints == [f"{other.url} answered 501", "nothing is listening"], proc.output
    assert proc.interrupt() == 0


def test_listen_start_filters_event_types_and_resigns(
    stack_cli_and_api, destination: Destination, procs: list[Proc], tmp_path: Path, ingest: httpx.Client
) -> None:
    _stack, env, api = stack_cli_and_api
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
        ack = ingest.post(ingest_url, content=webhook.body, headers=webhook.headers)
        assert ack.status_code == 200, ack.text
        sent[event_type], acked[event_type] = webhook, ack.json()["id"]
    refunded = f"/v1/events/{acked['charge.refunded']}"
    until(lambda: api.get(refunded).status_code == 200, what="charge.refunded stored")
    # A sentinel of a listed type, stored after charge.refunded: listen goes through the events in stored order,
    # so once the sentinel is forwarded, charge.refunded was passed over, not merely not reached yet.
    sentinel = sample("identity", "user.created", secret=PROVIDER_SECRET)
    assert ingest.post(ingest_url, content=sentinel.body, headers=sentinel.headers).status_code == 200
    until(lambda: len(destination.requests) >= 3, what="the two events of the listed types and the sentinel")
    assert len(destination.requests) == 3
    # Matched by content, not by position: events ingested on different shards may be stored in either order, and
    # listen forwards in stored order, so only charge.refunded's absence is promised, not paid before created.
    paid = next(request for request in destination.requests if "pay-signature" in request.headers)
    created_id = sent["user.created"].headers["relay-id"]
    relayed = {request.headers.get("relay-id") for request in destination.requests if request is not paid}
    assert relayed == {created_id, sentinel.headers["relay-id"]}  # each forwarded with its own idempotency id
    (created,) = (request for request in destination.requests if request.headers.get("relay-id") == created_id)
    assert json.loads(paid.body)["type"] == "invoice.paid"
    stripe.WebhookSignature.verify_header(paid.body.decode(), paid.headers["pay-signature"], RESIGN, tolerance=300)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(paid.body.decode(), paid.headers["pay-signature"], PROVIDER_SECRET)
    standardwebhooks.Webhook(RESIGN).verify(created.body, relay_as("webhook", created.headers))
    svix.Webhook(RESIGN).verify(created.body, relay_as("svix", created.headers))
    assert proc.interrupt() == 0
    assert len(re.findall(r"→ 200", proc.output)) == 3


@pytest.mark.parametrize("status", [404, 405, 501])
def test_a_server_without_the_route_or_method_gets_the_hint(status: int) -> None:
    """501 too: what `python -m http.server` answers a POST (it has no such method at all)."""
    event = {"id": "evt_01M8WF4NPWP4MH2SKW9ECTNM4E", "method": "POST"}
    done = Forwarded(status, 3, None, "SimpleHTTP/0.6 Python/3.11.7", False, {}, None)
    told = hint("http://localhost:13000/webhooks", event, done, [])
    assert told == (
        f"  hint: http://localhost:13000/webhooks answered {status} from 'SimpleHTTP/0.6 Python/3.11.7': is that "
        "your app, and does it take POST at that path? (`hookyard replay evt_01M8WF4NPWP4MH2SKW9ECTNM4E --to "
        "http://localhost:13000/webhooks` sends it again)"
    )
    assert hint("http://localhost:13000/webhooks", event, done._replace(status=500), []) is None
