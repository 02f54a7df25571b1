"""POST /v1/events/{id}/forwards: a forward ``hookyard listen`` made itself, recorded on its event as a delivery
of source ``listen``, listed with the event's attempts (so ``hookyard tail`` and the inbox show it), never
retried, and remembered as the endpoint's replay target. hookyard sends nothing for it."""

from __future__ import annotations

from litestar.testing import AsyncTestClient

from control.service.forwards import replay_target
from tests.conftest import Account
from tests.control.replay.support import stored_event
from tests.events_support import DELIVERY_FIELDS
from tests.helpers import assert_error

APP = "http://localhost:3000/webhooks"


async def test_a_forward_is_recorded_and_listed_with_the_events_attempts(
    client: AsyncTestClient, account: Account, database_url: str, ctx
) -> None:
    ids = await stored_event(client, account, database_url, body=b'{"type":"invoice.paid"}')
    report = {
        "url": APP,
        "status": 401,
        "latency_ms": 7,
        "sent_headers": {"Content-Type": "application/json", "stripe-signature": "t=1,v1=ab"},
        "response_body": "signature mismatch",
    }
    resp = await client.post(f"/v1/events/{ids['event']}/forwards", json=report, headers=account.headers)
    assert resp.status_code == 201, resp.text
    recorded = resp.json()
    assert set(recorded) == DELIVERY_FIELDS
    assert recorded["source"] == "listen"
    assert (recorded["destination_url"], recorded["response_status"], recorded["latency_ms"]) == (APP, 401, 7)
    assert (recorded["success"], recorded["response_body"], recorded["request_body"]) == (
        False,
        "signature mismatch",
        None,
    )
    assert recorded["request_headers"] == {"content-type": "application/json", "stripe-signature": "t=1,v1=ab"}
    assert (recorded["destination_id"], recorded["rule_id"], recorded["attempt_number"]) == (None, None, 1)

    event = (await client.get(f"/v1/events/{ids['event']}", headers=account.headers)).json()
    assert [d["id"] for d in event["deliveries"]] == [recorded["id"]]
    listed = await client.get(
        f"/v1/endpoints/{ids['endpoint']}/deliveries", params={"source": "listen"}, headers=account.headers
    )
    assert [d["id"] for d in listed.json()["deliveries"]] == [recorded["id"]]
    assert await replay_target(ctx, ids["endpoint"]) == APP

    # not a rule delivery: a retry says to replay instead
    retried = await client.post(f"/v1/deliveries/{recorded['id']}/retry", headers=account.headers)
    assert_error(retried, 400, "validation_error", field="delivery_id")
    assert "a forward by hookyard listen" in retried.json()["error"]["message"]


async def test_a_forward_that_got_no_answer_says_why(
    client: AsyncTestClient, account: Account, database_url: str
) -> None:
    ids = await stored_event(client, account, database_url, body=b"{}")
    path = f"/v1/events/{ids['event']}/forwards"
    silent = await client.post(path, json={"url": APP, "status": None}, headers=account.headers)
    assert_error(silent, 400, "validation_error", field="error")
    refused = await client.post(
        path, json={"url": APP, "error": "ConnectError: [Errno 111] Connection refused"}, headers=account.headers
    )
    assert refused.status_code == 201, refused.text
    assert (refused.json()["response_status"], refused.json()["success"]) == (None, False)
    assert refused.json()["error"].startswith("ConnectError")


async def test_bad_reports_are_400_naming_the_field_and_foreign_events_404(
    client: AsyncTestClient, account: Account, other_account: Account, database_url: str
) -> None:
    ids = await stored_event(client, account, database_url, body=b"{}")
    path = f"/v1/events/{ids['event']}/forwards"
    for body, field in (
        ({"status": 200}, "url"),
        ({"url": "ftp://x"}, "url"),
        ({"url": APP, "status": 99}, "status"),
        ({"url": APP, "status": 200, "sent_headers": {"x-a": "1\r\nx-b: 2"}}, "sent_headers.x-a"),
        ({"url": APP, "status": 200, "sent_headers": {"bad name": "1"}}, "sent_headers.bad name"),
        ({"url": APP, "status": 200, "response_body": "x" * 65_537}, "response_body"),
        ({"url": APP, "status": 200, "extra": 1}, "extra"),
    ):
        assert_error(await client.post(path, json=body, headers=account.headers), 400, "validation_error", field=field)
    foreign = await client.post(path, json={"url": APP, "status": 200}, headers=other_account.headers)
    assert_error(foreign, 404, "not_found")
    unknown = await client.post("/v1/events/nope/forwards", json={"url": APP, "status": 200}, headers=account.headers)
    assert_error(unknown, 404, "not_found")
    event = (await client.get(f"/v1/events/{ids['event']}", headers=account.headers)).json()
    assert event["deliveries"] == []
