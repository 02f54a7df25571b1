"""The provider catalog as a user meets it, through real edge, control and worker processes: an alias names a
provider in ``test-webhook`` (``stripe``, as the CLI always allowed) and the catalog's own providers' samples
arrive attributed and verified; ``auth-config`` takes ``provider`` and ``verify_token`` and refuses what
cannot work; Meta's GET challenge is answered at the edge and shows as a handshake; MCP does the same through
the same service functions."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.conftest import Account
from tests.helpers import db, module_database_url
from tests.onboarding.test_agent_flow import connected, module_settings  # noqa: F401 - a fixture
from tests.stack import Stack

pytestmark = pytest.mark.slow
database_url = module_database_url  # one database for the module, as the stack outlives each test


def _stored(api: httpx.Client, event_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        got = api.get(f"/v1/events/{event_id}")
        if got.status_code == 200 or time.monotonic() > deadline:
            assert got.status_code == 200, got.text
            return got.json()
        time.sleep(0.1)


@pytest.fixture
def api(shared_stack: Stack, account: Account) -> httpx.Client:
    with httpx.Client(base_url=shared_stack.control_url, headers=account.headers, timeout=30) as client:
        yield client


def test_an_alias_and_a_catalog_provider_are_sent_attributed_and_verified(api: httpx.Client) -> None:
    ep = api.post("/v1/endpoints", json={"name": "catalog"}).json()
    sent = api.post(f"/v1/endpoints/{ep['id']}/test-webhook", json={"provider": "stripe"})
    assert sent.status_code == 200, sent.text
    assert (sent.json()["provider"], sent.json()["accepted"]) == ("payments", True)
    for provider in ("slack", "twilio", "square", "gitlab"):  # a URL-signed one, a token one among them
        sent = api.post(f"/v1/endpoints/{ep['id']}/test-webhook", json={"provider": provider.upper()}).json()
        assert sent["accepted"], sent
        event = _stored(api, sent["event_id"])
        assert (event["provider"], event["signature_valid"], event["handshake"]) == (provider, True, False), event
    listed = api.get(f"/v1/endpoints/{ep['id']}/events", params={"provider": "Slack"}).json()["events"]
    assert [e["provider"] for e in listed] == ["slack"]
    refused = api.post(f"/v1/endpoints/{ep['id']}/test-webhook", json={"provider": "mailchimp"})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("provider: must be one of ")


def test_auth_config_names_the_provider_and_refuses_what_cannot_verify(api: httpx.Client) -> None:
    ep = api.post("/v1/endpoints", json={"name": "auth"}).json()
    path = f"/v1/endpoints/{ep['id']}/auth-config"
    set_ = api.patch(path, json={"provider": "Stripe"})
    assert (set_.status_code, set_.json()["provider"]) == (200, "payments")
    for body, field in (
        ({"provider": "nobody"}, "provider"),
        ({"provider": "discord", "secret": "not-an-ed25519-public-key"}, "secret"),
        ({"provider": "sendgrid", "secret": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"}, "secret"),
        ({"verify_token": " padded "}, "verify_token"),
    ):
        refused = api.patch(path, json=body)
        assert refused.status_code == 400, (body, refused.text)
        assert refused.json()["error"]["message"].startswith(f"{field}:"), refused.text
    key = "a8b4aa0ebfa4d9c4e5f1c8b05bd5ea8e1a5a64f9b0d3b4f73c0b25b5aa0cdb1a"  # an Ed25519 key in Discord's hex
    ok = api.patch(path, json={"provider": "discord", "secret": key, "verify_token": "tok-12345"})
    assert ok.status_code == 200, ok.text
    assert (ok.json()["provider"], ok.json()["secret_set"], ok.json()["verify_token_set"]) == ("discord", True, True)
    cleared = api.patch(path, json={"provider": None, "verify_token": None}).json()
    assert (cleared["provider"], cleared["verify_token_set"]) == (None, False)


def test_meta_challenge_is_answered_at_the_edge_and_shown_as_a_handshake(api: httpx.Client) -> None:
    ep = api.post("/v1/endpoints", json={"name": "meta"}).json()
    patched = api.patch(
        f"/v1/endpoints/{ep['id']}/auth-config", json={"provider": "meta", "verify_token": "meatyhamhock"}
    )
    assert patched.status_code == 200, patched.text
    params = {"hub.mode": "subscribe", "hub.challenge": "1158201444", "hub.verify_token": "meatyhamhock"}
    answer = httpx.get(ep["ingest_url"], params=params, timeout=10)
    assert (answer.status_code, answer.text) == (200, "1158201444")
    event = _stored(api, answer.headers["x-hookyard-event-id"])
    assert (event["provider"], event["event_type"], event["handshake"]) == ("meta", "meta_hub_challenge", True)


async def test_mcp_names_providers_as_v1_does(shared_stack: Stack, account: Account) -> None:
    async with connected(shared_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="mcp-catalog"))["id"]
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="github")
        assert (sent["provider"], sent["event_type"], sent["accepted"]) == ("code_host", "ping", True), sent
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="zoom")
        assert (sent["provider"], sent["accepted"]) == ("zoom", True), sent
        config = await t.ok("update_auth_config", endpoint_id=ep, provider="clerk", verify_token="vt-1")
        assert (config["provider"], config["verify_token_set"]) == ("identity", True)
        error = await t.error("update_auth_config", endpoint_id=ep, provider="nobody")
        assert error["message"].startswith("provider:")


async def test_a_rule_on_meta_provider_takes_the_names_the_event_list_takes(
    shared_stack: Stack, account: Account, database_url: str, api: httpx.Client
) -> None:
    """``github`` in a condition is ``code_host``, the name the sample is stored with, as in ``list_events``:
    stored as such (the answer shows it), and the flush routes the sample by it; a name of no provider is
    refused with the names there are. Over MCP and /v1 alike (one service function)."""
    nowhere = "http://127.0.0.1:9/hook"  # never reached: routing is read from the tasks the flush commits
    async with connected(shared_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="provider-rules"))["id"]
        by_alias = await t.ok(
            "create_destination",
            endpoint_id=ep,
            url=nowhere,
            condition_tree={"field": "meta.provider", "operator": "equals", "value": "GitHub"},
        )
        assert by_alias["rule"]["condition_tree"]["value"] == "code_host", by_alias
        by_pattern = await t.ok(
            "create_destination",
            endpoint_id=ep,
            url=nowhere,
            condition_tree={"field": "meta.provider", "operator": "regex", "value": "^github$"},
        )
        not_stripe = await t.ok(
            "create_destination",
            endpoint_id=ep,
            url=nowhere,
            condition_tree={"field": "meta.provider", "operator": "not_equals", "value": "stripe"},
        )
        error = await t.error(
            "create_destination",
            endpoint_id=ep,
            url=nowhere,
            condition_tree={"field": "meta.provider", "operator": "equals", "value": "gitlub"},
        )
        assert error["message"].startswith('condition_tree.value: "gitlub" is not a provider'), error
        assert {"code_host", "github"} <= set(error["message"].replace(",", " ").split())
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="github", event_type="push")
        listed = await t.ok("list_events", endpoint_id=ep, provider="github")
    assert [e["id"] for e in listed["events"]] == [sent["event_id"]]
    refused = api.post(
        f"/v1/endpoints/{ep}/rules",
        json={
            "name": "x",
            "destination_ids": [by_alias["id"]],
            "condition_tree": {"field": "meta.provider", "operator": "equals", "value": "gitlub"},
        },
    )
    assert (refused.status_code, refused.json()["error"]["message"]) == (400, error["message"])
    async with db(database_url) as conn:
        routed = {
            r[0]
            for r in await conn.fetch("SELECT destination_id FROM delivery_tasks WHERE event_id = $1", sent["event_id"])
        }
    assert routed == {by_alias["id"], by_pattern["id"], not_stripe["id"]}
