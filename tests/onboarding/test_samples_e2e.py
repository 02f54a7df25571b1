"""As a new user meets it: ``hookyard trigger`` (with the providers' own names) sends a
sample that the provider's official library accepts, both as the edge stored it (signed with the endpoint's
secret, shown as "verified" by ``tail`` and ``up``'s activity lines) and as ``hookyard listen`` forwards it
to a local app that verifies with the library: verbatim with the endpoint's secret, and with
``--resign-with S`` with S. Real edge, control and worker processes, the CLI as subprocesses, a real
loopback app (``tests.onboarding.verifying_app``)."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import module_settings_fixture  # noqa: F401 - the fixture module_settings
from tests.onboarding.clirun import Proc, cli, until
from tests.onboarding.verifying_app import verified_by, verifying_app
from tests.stack import Stack

pytestmark = pytest.mark.slow

RESIGN = "whsec_" + base64.b64encode(b"the-local-apps-own-secret-32byte").decode()

# (what a person types, the provider it means, event type, the signature header sent, what verifies it)
TRIGGERED = (
    ("stripe", "payments", "payment_intent.succeeded", "stripe-signature", ["stripe"]),
    ("clerk", "identity", "user.created", "svix-signature", ["svix"]),
    ("svix", "identity", "session.created", "svix-signature", ["svix"]),
    ("shopify", "commerce", "orders/paid", "x-shopify-hmac-sha256", ["shopify"]),
    ("github", "code_host", "push", "x-hub-signature-256", ["github"]),
)
# Re-signed by listen: an identity event also under the Standard Webhooks names, so both libraries read it.
RESIGNED_BY = {"payments": ["stripe"], "identity": ["svix", "standardwebhooks"], "commerce": ["shopify"]}


@pytest.fixture
def cli_and_api(stack_cli_and_api) -> tuple[dict[str, str], httpx.Client]:
    """The module's edge, control and worker (the worker logs its activity, as ``hookyard up`` prints it),
    started once (``shared_stack``); a new account per test, its key in the CLI's environment."""
    _stack, env, api = stack_cli_and_api
    return env, api


def _trigger(env: dict[str, str], *args: str) -> str:
    done = cli(env, "trigger", *args)
    assert done.returncode == 0, done.stderr
    return re.search(r"sent .*: 200, (evt_\w+)$", done.stdout.strip()).group(1)


def _stored(api: httpx.Client, event_id: str) -> dict[str, Any]:
    return until(lambda: (r := api.get(f"/v1/events/{event_id}")).status_code == 200 and r.json(), what=event_id)


def test_triggered_samples_verify_with_each_providers_library_stored_and_forwarded(
    cli_and_api, shared_stack: Stack, procs: list[Proc], tmp_path: Path
) -> None:
    env, api = cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "first hour", "external_ref": "first-hour"}).json()
    ep, secret = endpoint["id"], endpoint["signing_secret"]  # verification is off: the new endpoint's default
    with verifying_app(secret) as verbatim, verifying_app(RESIGN) as resigned:
        listeners = [
            Proc(["listen", ep, "--forward-to", verbatim.url], env, tmp_path / "verbatim.log"),
            Proc(["listen", ep, "--forward-to", resigned.url, "--resign-with", RESIGN], env, tmp_path / "resign.log"),
        ]
        tail = Proc(["tail", ep], env, tmp_path / "tail.log")
        procs.extend([*listeners, tail])
        for listener in listeners:
            listener.wait_for_output("Forwarding to")
        tail.wait_for_output("Following 1 endpoint")

        sent = {_trigger(env, t[0], t[2], "--endpoint", "first-hour"): t for t in TRIGGERED}
        plain = httpx.post(endpoint["ingest_url"], json={"hello": "an unsigned request"}).json()["id"]

        until(lambda: len(verbatim.snapshot()) == len(resigned.snapshot()) == 6, what="six forwarded to each app")
        as_sent = {c.body: c for c in verbatim.snapshot()}
        as_resigned = {c.body: c for c in resigned.snapshot()}

        for event_id, (alias, provider, event_type, header, libraries) in sent.items():
            event = _stored(api, event_id)
            assert (event["provider"], event["event_type"]) == (provider, event_type), alias
            assert (event["signature_valid"], event["signature_failure_reason"]) == (True, None), alias
            body, headers = event["body"].encode(), event["headers"]
            assert header in headers, (alias, sorted(headers))
            # As the edge stored it: the provider's library accepts it with the endpoint's secret.
            assert verified_by(body, headers, secret) == libraries, alias
            # Forwarded verbatim by listen: the local app's library accepts it with the endpoint's secret.
            forwarded = as_sent[body]
            assert (forwarded.libraries, forwarded.error) == (libraries, None), alias
            # Forwarded by listen --resign-with S: the library accepts it with S, and only with S.
            again = as_resigned[body]
            assert (again.libraries, again.error) == (RESIGNED_BY.get(provider, libraries), None), alias
            with pytest.raises(Exception):  # noqa: B017, PT011 - each library raises its own error
                verified_by(body, again.headers, secret)
            tail.wait_for_output(rf"{provider} +{re.escape(event_type)} +POST verified  {event_id}$")

        plain_body = _stored(api, plain)["body"].encode()
        assert as_sent[plain_body].error == "no signature this app can check"  # nothing signed it
        assert (as_resigned[plain_body].libraries, as_resigned[plain_body].error) == (["standardwebhooks"], None)
        tail.wait_for_output(rf"POST not checked  {plain}$")
        assert len(re.findall(r"→ 200", listeners[0].output)) == 5
        assert len(re.findall(r"→ 401", listeners[0].output)) == 1
        assert len(re.findall(r"→ 200", listeners[1].output)) == 6
        for proc in (*listeners, tail):
            assert proc.interrupt() == 0

    # `hookyard up` prints the worker's activity lines: the same word.
    log = (shared_stack.log_dir / "worker.log").read_text()
    for event_id in sent:
        assert re.search(rf"hookyard\.activity: event +{event_id}  {ep}  .*  verified$", log, re.MULTILINE), log
    assert re.search(rf"hookyard\.activity: event +{plain}  {ep}  .*  not checked$", log, re.MULTILINE), log


def test_neutral_names_on_request_and_verified_all_the_same(cli_and_api) -> None:
    env, api = cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "neutral", "external_ref": "neutral"}).json()
    by_cli = _trigger(env, "payments", "invoice.paid", "--endpoint", "neutral", "--headers", "neutral")
    by_api = api.post(
        f"/v1/endpoints/{endpoint['id']}/test-webhook",
        json={"provider": "commerce", "event_type": "orders/create", "headers": "neutral"},
    ).json()
    assert (by_api["accepted"], by_api["signature_header"]) == (True, "x-shop-hmac-sha256")
    for event_id, neutral, real in (
        (by_cli, "pay-signature", "stripe-signature"),
        (by_api["event_id"], "x-shop-topic", "x-shopify-topic"),
    ):
        event = _stored(api, event_id)
        assert neutral in event["headers"]
        assert real not in event["headers"]
        assert event["signature_valid"] is True
    refused = api.post(
        f"/v1/endpoints/{endpoint['id']}/test-webhook",
        json={"provider": "payments", "event_type": "invoice.paid", "headers": "vendor"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "validation_error"
    assert "headers" in refused.json()["error"]["message"]


def test_replay_resign_with_signs_where_the_providers_library_looks(cli_and_api) -> None:
    """``hookyard replay --resign-with S`` (the latest event, or one named): re-signed with S in the provider's
    own header, as ``listen --resign-with`` signs, so the local app's library accepts it with S and only with
    S; the identity message id is the event's own; a ``/v1`` replay, recorded as a delivery."""
    env, api = cli_and_api
    endpoint = api.post("/v1/endpoints", json={"name": "replayed", "external_ref": "replayed"}).json()
    with verifying_app(RESIGN) as app:
        for (alias, provider, event_type, header, libraries), named in ((TRIGGERED[0], False), (TRIGGERED[1], True)):
            event_id = _trigger(env, alias, event_type, "--endpoint", "replayed")
            event = _stored(api, event_id)
            which = [event_id] if named else ["--endpoint", "replayed"]
            done = cli(env, "replay", *which, "--to", app.url, "--resign-with", RESIGN)
            assert done.returncode == 0, (alias, done.stdout, done.stderr)
            said = rf"replayed {event_id} to {re.escape(app.url)}, re-signed: 200, \d+ ms \(dlv_\w+\)\n"
            assert re.fullmatch(said, done.stdout), done.stdout
            got = app.snapshot()[-1]
            assert (got.body, got.libraries, got.error) == (event["body"].encode(), libraries, None), alias
            assert got.headers[header] != event["headers"][header], alias  # signed again, in the same header
            assert "x-signature" not in got.headers, alias
            with pytest.raises(Exception):  # noqa: B017, PT011 - each library raises its own error
                verified_by(got.body, got.headers, endpoint["signing_secret"])
            if provider == "identity":
                assert got.headers["svix-id"] == event["headers"]["svix-id"]
    assert len(app.snapshot()) == 2
