"""Labels on real events of the four providers, through real processes: rules created over /v1, provider
samples (``shared.samples``) sent to the edge right after, each event labelled by the flush."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from control.routing.conditions import text_form
from shared.samples import sample
from tests.conftest import make_account
from tests.helpers import wait_for
from tests.stack import Stack

pytestmark = pytest.mark.slow

# provider, event, label rules (source, path, key)
CASES = [
    (
        "payments",
        "invoice.paid",
        [("body", "data.object.customer", "customer"), ("body", "data.object.amount_paid", "paid")],
    ),
    (
        "identity",
        "user.created",
        [("body", "data.email_addresses.0.email_address", "email"), ("header", "Relay-Id", "delivery")],
    ),
    ("commerce", "orders/create", [("header", "X-Shop-Shop-Domain", "shop"), ("body", "total_price", "total")]),
    ("code_host", "push", [("header", "X-CodeHost-Event", "event"), ("body", "repository.full_name", "repo")]),
]


SECRET = "whsec_" + "c2FtcGxlLXNpZ25pbmcta2V5LTAxMjM0NTY3ODk="


def _expected(doc: Any, headers: dict[str, str], source: str, path: str) -> str:
    if source == "header":
        return headers[path.lower()]
    value = doc
    for step in path.split("."):
        value = value[int(step)] if isinstance(value, list) else value[step]
    return text_form(value)


async def test_labels_on_real_events_of_the_four_providers(stack: Stack, database_url: str) -> None:
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush")
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers, timeout=30) as api:
        sent: dict[str, tuple[dict[str, str], list[tuple[str, str, str]], Any]] = {}
        for provider, event_type, rules in CASES:
            endpoint = (await api.post("/v1/endpoints", json={"name": provider})).json()
            for source, path, key in rules:
                body = {"source": source, "path": path, "output_key": key}
                assert (await api.post(f"/v1/endpoints/{endpoint['id']}/labels", json=body)).status_code == 201
            # sent at once after the 2xx: the flush must label it under the new rules
            # signed (verification is off: any secret), so it carries the headers providers are known by
            webhook = sample(provider, event_type, secret=SECRET, seed=7)
            async with httpx.AsyncClient() as provider_client:
                ack = await provider_client.post(endpoint["ingest_url"], content=webhook.body, headers=webhook.headers)
            assert ack.status_code == 200, ack.text
            expected = {key: _expected(json.loads(webhook.body), webhook.headers, s, p) for s, p, key in rules}
            sent[ack.json()["id"]] = (expected, rules, provider)

        for event_id, (expected, rules, provider) in sent.items():

            async def stored(event_id: str = event_id) -> dict[str, Any] | None:
                resp = await api.get(f"/v1/events/{event_id}")
                return resp.json() if resp.status_code == 200 else None

            event = await wait_for(stored, timeout=20)
            assert event["provider"] == provider
            assert [label["key"] for label in event["labels"]] == [key for _, _, key in rules]
            assert {label["key"]: label["value"] for label in event["labels"]} == expected, provider
            # and q finds the event by a label value
            some = next(iter(expected.values()))
            found = (await api.get(f"/v1/endpoints/{event['endpoint_id']}/events", params={"q": some})).json()
            assert event_id in [e["id"] for e in found["events"]], (provider, some)
