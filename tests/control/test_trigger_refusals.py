"""A test webhook refused for its event type names the provider as the caller wrote it: ``svix`` is an
``identity`` provider, and a refusal that said only "identity sends no 'invoice.paid'" named something the
caller never typed (found trying the README from a fresh clone). A provider's handshake says why it has no
sample: a public-key provider's cannot be signed, and any is the provider checking the URL, not an event."""

from __future__ import annotations

from shared.settings import Settings
from tests.conftest import Account
from tests.helpers import concurrent_client


async def test_an_unknown_event_type_names_the_provider_as_given(settings: Settings, account: Account) -> None:
    async with concurrent_client(settings) as client:
        endpoint = await client.post("/v1/endpoints", json={"name": "trigger"}, headers=account.headers)
        assert endpoint.status_code == 201, endpoint.text
        url = f"/v1/endpoints/{endpoint.json()['id']}/test-webhook"
        for provider, named in (("svix", "svix (identity)"), ("identity", "identity"), ("stripe", "stripe (payments)")):
            sent = await client.post(url, json={"provider": provider, "event_type": "nope.x"}, headers=account.headers)
            assert sent.status_code == 400, sent.text
            error = sent.json()["error"]
            assert error["code"] == "validation_error"
            assert error["message"].startswith(f"event_type: {named} sends no 'nope.x'; one of "), error


async def test_discords_ping_is_refused_saying_why_there_is_no_sample(settings: Settings, account: Account) -> None:
    """Discord's handshake is PING (``type`` 1), signed with Discord's private key, which hookyard does not
    hold: a sample PING would fail the check and be refused 401. "discord sends no 'PING'; one of blep" read
    as if Discord had no PING at all (found by the fifth fresh-clone trial)."""
    async with concurrent_client(settings) as client:
        endpoint = await client.post("/v1/endpoints", json={"name": "discord"}, headers=account.headers)
        url = f"/v1/endpoints/{endpoint.json()['id']}/test-webhook"
        for asked in ("PING", "ping", "discord_ping"):
            sent = await client.post(url, json={"provider": "discord", "event_type": asked}, headers=account.headers)
            assert sent.status_code == 400, sent.text
            message = sent.json()["error"]["message"]
            assert message.startswith(
                f"event_type: discord's {asked!r} is its handshake, which hookyard cannot sign"
            ), message
            assert "private key" in message, message
            assert message.endswith("; its samples: blep"), message
        other = await client.post(url, json={"provider": "discord", "event_type": "nope"}, headers=account.headers)
        assert other.json()["error"]["message"] == "event_type: discord sends no 'nope'; one of blep"


async def test_a_url_verification_handshake_is_named_as_the_providers_check(
    settings: Settings, account: Account
) -> None:
    """Slack's ``url_verification`` and Zoom's ``endpoint.url_validation`` were refused as "slack sends no
    'url_verification'; one of app_mention", as if the provider had none: it is a request the provider makes
    to verify the URL (answered at the edge, never delivered), not a webhook event a sample could stand for."""
    async with concurrent_client(settings) as client:
        endpoint = await client.post("/v1/endpoints", json={"name": "handshakes"}, headers=account.headers)
        url = f"/v1/endpoints/{endpoint.json()['id']}/test-webhook"
        for provider, asked, samples in (
            ("slack", "url_verification", "app_mention"),
            ("slack", "slack_url_verification", "app_mention"),
            ("zoom", "endpoint.url_validation", "meeting.started"),
            ("zoom", "zoom_url_validation", "meeting.started"),
        ):
            sent = await client.post(url, json={"provider": provider, "event_type": asked}, headers=account.headers)
            assert sent.status_code == 400, sent.text
            message = sent.json()["error"]["message"]
            assert message == (
                f"event_type: {provider}'s {asked!r} is its URL-verification handshake, not a webhook event to "
                f"simulate: a request {provider} makes to verify the URL when it is saved in its settings, which "
                f"the edge answers itself (stored with handshake: true, never delivered); its samples: {samples}"
            ), message
