"""Re-signing an event of a catalog provider beyond the four kinds (Slack, Twilio, Zoom...): replay's
`resign_with` and `hookyard listen --resign-with` sign it as that provider signs, in its own header, so the
app's copy of the provider's library verifies it with the app's secret. They used to add a Standard Webhooks
signature beside the captured one, which no Slack or Twilio library reads: the app refused every forward."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qsl

import pytest
from litestar.testing import AsyncTestClient
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

from control.cli.forward import request_of
from shared.samples import EVENT_TYPES, sample
from shared.signatures import provider_signature_header
from tests.conftest import Account
from tests.control.replay.support import stored_event
from tests.destination import Destination

APP_SECRET = "the_apps_own_secret_0123456789abcdef"
CAPTURED_SECRET = "the_endpoints_secret_abcdef0123456789"


async def _stored_sample(client: AsyncTestClient, account: Account, database_url: str, provider: str) -> str:
    made = sample(provider, EVENT_TYPES[provider][0], secret=CAPTURED_SECRET, url="https://hooks.example/h/x")
    ids = await stored_event(client, account, database_url, body=made.body, headers=made.headers, provider=provider)
    return ids["event"]


async def test_a_resigned_slack_event_verifies_with_slacks_library(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    event_id = await _stored_sample(client, account, database_url, "slack")
    replay = {"url": destination.url, "resign_with": APP_SECRET}
    response = await client.post(f"/v1/events/{event_id}/replay", json=replay, headers=account.headers)
    assert response.status_code == 200, response.text
    (got,) = destination.requests
    timestamp, signature = got.headers["x-slack-request-timestamp"], got.headers["x-slack-signature"]
    assert SignatureVerifier(APP_SECRET).is_valid(got.body, timestamp, signature)
    assert "x-signature" not in got.headers
    assert "webhook-signature" not in got.headers


async def test_a_resigned_twilio_event_signs_the_url_it_is_sent_to(
    client: AsyncTestClient, account: Account, database_url: str, destination: Destination
) -> None:
    """Twilio signs the URL it posts to: the re-signature is over the replay's URL, where the app checks it."""
    event_id = await _stored_sample(client, account, database_url, "twilio")
    url = destination.url + "?x=1"
    response = await client.post(
        f"/v1/events/{event_id}/replay", json={"url": url, "resign_with": APP_SECRET}, headers=account.headers
    )
    assert response.status_code == 200, response.text
    (got,) = destination.requests
    params = dict(parse_qsl(got.body.decode()))
    assert RequestValidator(APP_SECRET).validate(url, params, got.headers["x-twilio-signature"])


def test_the_default_signature_header_of_a_catalog_event_is_its_own() -> None:
    """Replay's default `signature_header` (and the inbox's re-sign box) name the provider's own header, where
    the re-signature goes, not `x-signature`."""
    assert provider_signature_header({"content-type": "application/json"}, "slack") == "x-slack-signature"
    assert provider_signature_header({}, "zoom") == "x-zm-signature"


@pytest.mark.parametrize("provider", ["slack", "zoom"])
def test_listen_resigns_a_catalog_event_in_the_providers_own_header(provider: str) -> None:
    """What `hookyard listen --resign-with` sends: the provider's own signature header, made with the app's
    secret over the provider's own message (both `v0:{timestamp}:{body}`)."""
    made = sample(provider, EVENT_TYPES[provider][0], secret=CAPTURED_SECRET)
    event: dict[str, Any] = {"method": "POST", "headers": made.headers, "body": made.body.decode()}
    event["provider"] = provider
    _, headers, body = request_of(event, APP_SECRET, "http://localhost:3000/webhooks")
    names = {"slack": ("x-slack-signature", "x-slack-request-timestamp")}
    names["zoom"] = ("x-zm-signature", "x-zm-request-timestamp")
    signature_name, timestamp_name = names[provider]
    message = b"v0:" + headers[timestamp_name].encode() + b":" + body
    expected = "v0=" + hmac.new(APP_SECRET.encode(), message, hashlib.sha256).hexdigest()
    assert headers[signature_name] == expected
    assert headers[signature_name] != made.headers[signature_name]
