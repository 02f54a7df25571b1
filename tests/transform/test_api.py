"""/v1: a destination's transform checked on write, the dry run, and replay with a transform composed with
``resign_with`` (checked at the receiving end with Stripe's own library). Real Postgres, loopback sinks."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import stripe
from litestar.testing import AsyncTestClient

from shared.settings import Settings
from tests.conftest import Account
from tests.destination import Destination
from tests.events_support import Ev, store
from tests.helpers import assert_error, create_endpoint, db

SECRET = "whsec_replay_secret_0123456789"
BODY = b'{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_42","amount_due":2000}}}'
SLACK = (
    "function handler(request, context) {\n"
    "  const event = request.body;\n"
    "  return { ...request, body: { text: `${event.type}: ${event.data.object.id}` } };\n"
    "}"
)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, deliver_timeout_s=1.0, deliver_lease_s=5.0)


async def _event(client: AsyncTestClient, account: Account, database_url: str, **fields: Any) -> dict[str, str]:
    endpoint = await create_endpoint(client, account.headers)
    ev = Ev(endpoint_id=endpoint["id"], body=BODY, provider="payments", event_type="invoice.paid", **fields)
    async with db(database_url) as conn:
        await store(conn, None, None, [ev])
    return {"endpoint": endpoint["id"], "event": ev.id}


async def _test(client: AsyncTestClient, account: Account, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/transformations/test", json=body, headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize(
    ("transform", "message"),
    [
        ("function handler(r) {\n  return r +;\n}", "transform: line 2: SyntaxError: Unexpected token ';'"),
        ("function transform(r) { return r; }", "the transform defines no function handler(request, context)"),
        ("throw new Error('no');\nfunction handler(r) { return r; }", "transform: line 1: while loading: Error: no"),
        ("x" * 65_537, "transform"),
        ("function handler(r) { return r; } // \x00", "transform"),
    ],
)
async def test_a_transform_is_checked_on_write(client, account, transform: str, message: str) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": "https://example.com/hooks", "transform": transform},
        headers=account.headers,
    )
    assert_error(resp, 400, "validation_error")
    assert message in resp.json()["error"]["message"]
    ok = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": "https://example.com/hooks"}, headers=account.headers
    )
    resp = await client.patch(
        f"/v1/destinations/{ok.json()['id']}", json={"transform": transform}, headers=account.headers
    )
    assert_error(resp, 400, "validation_error")
    got = await client.get(f"/v1/destinations/{ok.json()['id']}", headers=account.headers)
    assert got.json()["transform"] is None


async def test_the_dry_run_on_a_stored_event_as_a_destination_sees_it(client, account, database_url) -> None:
    ids = await _event(client, account, database_url)
    resp = await client.post(
        f"/v1/endpoints/{ids['endpoint']}/destinations",
        json={"url": "https://hooks.example.com/in/slack?team=t1", "headers": {"x-team": "billing"}},
        headers=account.headers,
    )
    destination = resp.json()["id"]
    source = (
        "function handler(request, context) {\n"
        "  console.log(context.event.provider, context.event.event_type, context.destination.id);\n"
        "  request.headers['x-seen'] = request.headers['x-team'] + ' ' + request.path + '?' + request.query;\n"
        "  request.body = { amount: request.body.data.object.amount_due / 100 };\n"
        "  return request;\n"
        "}"
    )
    result = await _test(client, account, transform=source, event_id=ids["event"], destination_id=destination)
    assert result["error"] is None
    assert result["skipped"] is False
    assert result["logs"] == [f"payments invoice.paid {destination}"]
    request = result["request"]
    assert request["body"] == {"amount": 20}
    assert request["headers"]["x-seen"] == "billing /in/slack?team=t1"
    assert (request["method"], request["path"], request["query"]) == ("POST", "/in/slack", "team=t1")
    assert result["duration_ms"] >= 0
    # nothing was sent or stored
    deliveries = await client.get(f"/v1/endpoints/{ids['endpoint']}/deliveries", headers=account.headers)
    assert deliveries.json()["deliveries"] == []


async def test_the_dry_run_on_a_given_request_reports_errors_and_skips(client, account) -> None:
    request = {"method": "POST", "path": "/x", "headers": {"content-type": "application/json"}, "body": {"type": "a"}}
    skipped = await _test(client, account, transform="function handler() { return null; }", request=request)
    assert (skipped["request"], skipped["skipped"], skipped["error"]) == (None, True, None)
    thrown = await _test(
        client, account, transform="function handler(r) {\n  console.log('before');\n  r.nope.x;\n}", request=request
    )
    assert thrown["error"] == {"message": "TypeError: Cannot read properties of undefined (reading 'x')", "line": 3}
    assert thrown["logs"] == ["before"]
    syntax = await _test(client, account, transform="function handler( {", request=request)
    assert syntax["error"]["line"] == 1
    assert syntax["error"]["message"].startswith("SyntaxError")
    bad = await _test(
        client, account, transform="function handler(r) { r.headers.host = 'x'; return r; }", request=request
    )
    assert "headers.host" in bad["error"]["message"]
    looped = await _test(client, account, transform="function handler() { for (;;) {} }", request=request)
    assert looped["error"]["message"] == "stopped: still running after 1 s"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"transform": "function handler(r) { return r; }"}, "event_id"),
        (
            {"transform": "function handler(r) { return r; }", "request": {}, "destination_id": "dst_1"},
            "destination_id",
        ),
        ({"transform": "", "request": {}}, "transform"),
    ],
)
async def test_the_dry_run_refuses_what_it_cannot_run(client, account, body: dict, field: str) -> None:
    resp = await client.post("/v1/transformations/test", json=body, headers=account.headers)
    assert_error(resp, 400, "validation_error")
    assert field in resp.json()["error"]["message"]


async def test_the_dry_run_on_a_given_request_in_a_stored_events_context(client, account, database_url) -> None:
    ids = await _event(client, account, database_url)
    resp = await client.post(
        f"/v1/endpoints/{ids['endpoint']}/destinations",
        json={"url": "https://hooks.example.com/in"},
        headers=account.headers,
    )
    source = "function handler(r, c) { r.body.seen = [c.event.event_type, c.destination.name]; return r; }"
    request = {"path": "/other", "headers": {"content-type": "application/json"}, "body": '{"n": 1}'}
    result = await _test(
        client, account, transform=source, event_id=ids["event"], destination_id=resp.json()["id"], request=request
    )
    assert result["request"]["body"] == {"n": 1, "seen": ["invoice.paid", None]}
    assert result["request"]["path"] == "/other"


async def test_the_dry_run_of_another_accounts_event_is_not_found(client, account, other_account, database_url) -> None:
    ids = await _event(client, other_account, database_url)
    resp = await client.post(
        "/v1/transformations/test",
        json={"transform": "function handler(r) { return r; }", "event_id": ids["event"]},
        headers=account.headers,
    )
    assert_error(resp, 404, "not_found")


async def test_a_replay_with_a_transform_is_resigned_over_what_it_returns(
    client, account, database_url, destination: Destination
) -> None:
    ids = await _event(client, account, database_url)
    resp = await client.post(
        f"/v1/events/{ids['event']}/replay",
        json={
            "url": destination.url,
            "transform": SLACK,
            "resign_with": SECRET,
            "signature_header": "stripe-signature",
        },
        headers=account.headers,
    )
    assert resp.status_code == 200, resp.text
    outcome = resp.json()
    assert outcome["success"] is True
    assert outcome["transform"]["outcome"] == "applied"
    (got,) = await destination.wait_for(1)
    assert msgspec.json.decode(got.body) == {"text": "invoice.paid: in_42"}
    event = stripe.Webhook.construct_event(got.body.decode(), got.headers["stripe-signature"], SECRET)
    assert event["text"] == "invoice.paid: in_42"


async def test_a_replay_its_transform_skips_or_fails_sends_nothing(
    client, account, database_url, destination: Destination
) -> None:
    ids = await _event(client, account, database_url)
    for transform, outcome in (
        ("function handler() { return null; }", "skipped"),
        ("function handler(r) { return r.x.y; }", "failed"),
    ):
        resp = await client.post(
            f"/v1/events/{ids['event']}/replay",
            json={"url": destination.url, "transform": transform},
            headers=account.headers,
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["transform"]["outcome"] == outcome
        assert resp.json()["status"] is None
    assert destination.requests == []
    listed = await client.get(f"/v1/endpoints/{ids['endpoint']}/deliveries", headers=account.headers)
    assert sorted(d["transform"]["outcome"] for d in listed.json()["deliveries"]) == ["failed", "skipped"]
    resp = await client.post(
        f"/v1/events/{ids['event']}/replay",
        json={"url": destination.url, "transform": "function handler( {"},
        headers=account.headers,
    )
    assert_error(resp, 400, "validation_error")
    assert resp.json()["error"]["message"].startswith("transform: line 1: SyntaxError")


async def test_an_event_nested_past_the_cap_is_a_failed_transform_in_the_dry_run_and_the_replay(
    client, account, database_url, destination: Destination
) -> None:
    """A captured webhook 20,000 levels deep (anyone can post one to an ingest URL): the dry run by its id and a
    replay through a transform answer a failed transform saying why; both were a 500 (RecursionError)."""
    endpoint = await create_endpoint(client, account.headers)
    ev = Ev(endpoint_id=endpoint["id"], body=b'{"a":' * 20_000 + b"1" + b"}" * 20_000)
    async with db(database_url) as conn:
        await store(conn, None, None, [ev])
    why = "the request body nests deeper than 128 levels, more than a transform is given; nothing was sent"
    result = await _test(client, account, transform="function handler(r) { return r; }", event_id=ev.id)
    assert (result["request"], result["error"]) == (None, {"message": why, "line": None})
    resp = await client.post(
        f"/v1/events/{ev.id}/replay",
        json={"url": destination.url, "transform": "function handler(r) { return r; }"},
        headers=account.headers,
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["transform"]["outcome"] == "failed"
    assert resp.json()["transform"]["error"]["message"] == why
    assert destination.requests == []


async def test_llms_txt_tells_an_agent_how_to_write_and_try_one(client) -> None:
    text = (await client.get("/llms.txt")).text
    assert "**Transforms.**" in text
    for needed in (
        "function handler(request, context)",
        "POST /v1/transformations/test",
        "update_destination_transform",
    ):
        assert needed in text
    assert "[POST /v1/transformations/test]" in text  # listed with the routes, its tool beside it
