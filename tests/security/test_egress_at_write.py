"""Under ``HOOKYARD_EGRESS=public`` a URL whose host is an internal IP literal or ``localhost`` is refused
when written (400, naming the field and the range), on every field a tenant gives an outbound URL in, over
/v1 and MCP alike; a public literal and a name that is not resolved here are accepted, and under ``any``
everything is. What a name resolves to stays the send-time check's (tests/security/test_egress_messages.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from control.app import create_app
from control.support.internal_addresses import written_refusal
from shared.settings import Settings
from tests.conftest import Account
from tests.events_support import Ev, store
from tests.helpers import create_endpoint, db
from tests.mcp_client import posted_call

REFUSED = {
    "http://127.0.0.1:9/x": "127.0.0.1 is a loopback address",
    "http://10.1.2.3:9/x": "10.1.2.3 is a private address",
    "http://localhost:9/x": "localhost is a loopback name (RFC 6761)",
    "http://[::1]:9/x": "::1 is a loopback address",
    "http://[::ffff:127.0.0.1]:9/x": "127.0.0.1 is a loopback address (embedded in ::ffff:7f00:1)",
}
ACCEPTED = ("http://8.8.8.8:9/x", "http://internal-db.invalid:9/x")
TAIL = ", which this instance does not deliver to (HOOKYARD_EGRESS=public; any allows it)"
PUBLIC = "https://hooks.example.com/in"


@dataclass(frozen=True)
class Field:
    """One field that takes an outbound URL, and one way of writing it over /v1 and over MCP."""

    name: str  # as the message names it
    method: str
    path: str
    tool: str
    ids: dict[str, str]  # the tool's id arguments
    auth: bool = False  # the URL goes in auth.token_url, beside a public url when creating

    def body(self, url: str) -> dict[str, Any]:
        if not self.auth:
            return {"url": url}
        auth = {"type": "oauth2_client_credentials", "token_url": url, "client_id": "c", "client_secret": "s"}
        return {"auth": auth} if self.method == "PATCH" else {"url": PUBLIC, "auth": auth}


async def _fields(client: AsyncTestClient, account: Account, settings: Settings) -> list[Field]:
    headers = account.headers
    endpoint = (await create_endpoint(client, headers))["id"]
    made = await client.post(f"/v1/endpoints/{endpoint}/destinations", json={"url": PUBLIC}, headers=headers)
    assert made.status_code == 201, made.text
    dst = made.json()["id"]
    alerting = await client.post("/v1/alert-destinations", json={"url": PUBLIC}, headers=headers)
    assert alerting.status_code == 201, alerting.text
    adst = alerting.json()["id"]
    event = Ev(endpoint_id=endpoint)
    async with db(settings.database_url) as conn:
        await store(conn, None, None, [event])
    created, patched = f"/v1/endpoints/{endpoint}/destinations", f"/v1/destinations/{dst}"
    return [
        Field("url", "POST", created, "create_destination", {"endpoint_id": endpoint}),
        Field("url", "PATCH", patched, "update_destination", {"destination_id": dst}),
        Field("auth.token_url", "POST", created, "create_destination", {"endpoint_id": endpoint}, auth=True),
        Field("auth.token_url", "PATCH", patched, "update_destination", {"destination_id": dst}, auth=True),
        Field("url", "POST", "/v1/alert-destinations", "create_alert_destination", {}),
        Field(
            "url", "PATCH", f"/v1/alert-destinations/{adst}", "update_alert_destination", {"alert_destination_id": adst}
        ),
        Field("url", "POST", f"/v1/events/{event.id}/replay", "replay_event", {"event_id": event.id}),
    ]


async def _written(client: AsyncTestClient, account: Account, field: Field, url: str) -> tuple[Any, Any]:
    """What /v1 answers (status, body) and what the MCP tool answers (is it an error, its content)."""
    answer = await client.request(field.method, field.path, json=field.body(url), headers=account.headers)
    result = await posted_call(client, account.key, field.tool, **field.ids, **field.body(url))
    return (answer.status_code, answer.json()), (result.get("isError") is True, result["structuredContent"])


@pytest.mark.parametrize("egress", ["public", "any"])
async def test_internal_literals_are_refused_when_written_under_public_only(
    settings: Settings, account: Account, egress: str
) -> None:
    async with AsyncTestClient(app=create_app(msgspec.structs.replace(settings, egress=egress))) as client:
        fields = await _fields(client, account, settings)
        for field in fields:
            for url, reason in REFUSED.items():
                (status, body), (is_error, content) = await _written(client, account, field, url)
                if egress == "any":
                    assert status in (200, 201), (field, url, body)
                    assert not is_error, (field, url, content)
                    continue
                expected = {"error": {"code": "validation_error", "message": f"{field.name}: {reason}{TAIL}"}}
                assert (status, body) == (400, expected), (field, url)
                assert (is_error, content) == (True, expected), (field, url)  # MCP says the same
            for url in ACCEPTED:  # a public literal; a name, never resolved when written
                (status, body), (is_error, content) = await _written(client, account, field, url)
                assert status in (200, 201), (field, url, body)
                assert not is_error, (field, url, content)


def test_what_a_host_reveals_as_written() -> None:
    """The same classification as at connect time, plus the names RFC 6761 keeps for loopback; no resolving."""
    refused = {
        "LOCALHOST.": "localhost is a loopback name (RFC 6761)",
        "app.localhost": "app.localhost is a loopback name (RFC 6761)",
        "169.254.169.254": "169.254.169.254 is a cloud metadata address",
        "100.64.1.1": "100.64.1.1 is a CGNAT (100.64/10) address",
        "0.0.0.0": "0.0.0.0 is the unspecified address",
        "fe80::1%25eth0": "fe80::1 is a link-local address",
        "127.1": "127.1 (127.0.0.1) is a loopback address",
        "2130706433": "2130706433 (127.0.0.1) is a loopback address",
        "2002:a00:1::": "10.0.0.1 is a private address (embedded in 2002:a00:1::)",
    }
    for host, reason in refused.items():
        assert written_refusal(host) == reason, host
    for host in ("8.8.8.8", "2606:4700::1111", "example.com", "localhost.example.com", "metadata.internal"):
        assert written_refusal(host) is None, host
