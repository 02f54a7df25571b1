"""A test webhook refused for its event type names the provider as the caller wrote it: ``svix`` is an
``identity`` provider, and a refusal that said only "identity sends no 'invoice.paid'" named something the
caller never typed (found trying the README from a fresh clone)."""

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
