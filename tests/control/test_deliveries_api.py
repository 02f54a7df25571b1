"""GET /v1/endpoints/{id}/deliveries: shape, filters, keyset paging, errors."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.events_support import DELIVERY_FIELDS, Ev, at, store, store_delivery
from tests.helpers import assert_error, create_endpoint, parse_ts

DESTINATIONS = ("dst_01KAAAAAAAAAAAAAAAAAAAAAA1", "dst_01KAAAAAAAAAAAAAAAAAAAAAA2")


@pytest.fixture
async def attempts(endpoint, conn):
    """Thirty attempts on two events: every source, both outcomes, and pairs sharing a created_at."""
    a, b = Ev(endpoint), Ev(endpoint)
    await store(conn, None, None, [a, b])
    start = at("2025-03-10T12:00:00")
    made = []
    for i in range(30):
        source = ("rule", "rule", "replay", "manual_test", "rule")[i % 5]
        success = i % 3 != 0
        created = start + timedelta(seconds=i // 2)  # two attempts per instant: ties broken by id
        event_id = (a.id, b.id)[i % 2]
        destination_id = None if source == "replay" else DESTINATIONS[i % 3 % 2]
        delivery_id = await store_delivery(
            conn,
            endpoint,
            event_id,
            created_at=created,
            success=success,
            source=source,
            attempt_number=i + 1,
            destination_id=destination_id,
        )
        made.append(
            {
                "id": delivery_id,
                "source": source,
                "success": success,
                "created_at": created,
                "destination_id": destination_id,
            }
        )
    return sorted(made, key=lambda d: (d["created_at"], d["id"]), reverse=True)


async def _all(client, account, endpoint, **params):
    seen, cursor = [], None
    while True:
        query = params | ({"cursor": cursor} if cursor else {})
        resp = await client.get(f"/v1/endpoints/{endpoint}/deliveries", params=query, headers=account.headers)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert set(body) == {"deliveries", "next_cursor"}
        seen += body["deliveries"]
        cursor = body["next_cursor"]
        if cursor is None:
            return seen


async def test_delivery_record_has_every_field(client, account, endpoint, conn):
    ev = Ev(endpoint)
    await store(conn, None, None, [ev])
    created = at("2025-03-10T12:00:00.123456")
    delivery_id = await store_delivery(
        conn,
        endpoint,
        ev.id,
        created_at=created,
        success=False,
        source="rule",
        attempt_number=3,
        destination_id="dst_9",
        destination_name="billing",
        destination_url="https://example.com/hook",
        rule_id="rule_9",
        request_headers={"x-hookyard-event-id": ev.id},
        request_body="{}",
        response_status=None,
        response_body=None,
        latency_ms=15000,
        error="timeout after 15 s",
    )
    resp = await client.get(f"/v1/endpoints/{endpoint}/deliveries", headers=account.headers)
    assert resp.status_code == 200, resp.text
    [delivery] = resp.json()["deliveries"]
    assert set(delivery) == DELIVERY_FIELDS
    assert delivery == {
        "id": delivery_id,
        "event_id": ev.id,
        "destination_id": "dst_9",
        "destination_name": "billing",
        "destination_url": "https://example.com/hook",
        "rule_id": "rule_9",
        "source": "rule",
        "attempt_number": 3,
        "request_headers": {"x-hookyard-event-id": ev.id},
        "request_body": "{}",
        "request_body_encoding": "utf8",
        "response_status": None,
        "response_body": None,
        "response_body_encoding": "utf8",
        "latency_ms": 15000,
        "success": False,
        "error": "timeout after 15 s",
        "duplicate_of": None,
        "created_at": delivery["created_at"],
        "transform": None,
        "trace_id": None,
        "span_id": None,
        "auth": None,
        "retry": "none",  # no task stored for it
        "next_attempt_at": None,
    }
    assert parse_ts(delivery["created_at"]) == created
    assert resp.json()["next_cursor"] is None


async def test_lists_newest_first_across_pages(client, account, endpoint, attempts):
    seen = await _all(client, account, endpoint, limit=7)
    assert [d["id"] for d in seen] == [d["id"] for d in attempts]
    first = (await client.get(f"/v1/endpoints/{endpoint}/deliveries", headers=account.headers)).json()
    assert len(first["deliveries"]) == 20
    assert first["next_cursor"]


async def test_filters_alone_and_combined(client, account, endpoint, attempts):
    cases = [
        ({"success": "false"}, lambda d: not d["success"]),
        ({"success": "true"}, lambda d: d["success"]),
        ({"source": "replay"}, lambda d: d["source"] == "replay"),
        ({"source": "manual_test"}, lambda d: d["source"] == "manual_test"),
        ({"source": "rule", "success": "false"}, lambda d: d["source"] == "rule" and not d["success"]),
        ({"destination_id": DESTINATIONS[0]}, lambda d: d["destination_id"] == DESTINATIONS[0]),
        (
            {"destination_id": DESTINATIONS[1], "success": "false"},
            lambda d: d["destination_id"] == DESTINATIONS[1] and not d["success"],
        ),
        ({"destination_id": "dst_01KAAAAAAAAAAAAAAAAAAAAAA3"}, lambda d: False),  # none, or another endpoint's
    ]
    for params, keep in cases:
        seen = await _all(client, account, endpoint, limit=4, **params)
        assert [d["id"] for d in seen] == [d["id"] for d in attempts if keep(d)], params


async def test_only_the_endpoints_own_deliveries(client, account, endpoint, conn, attempts):
    other = (await create_endpoint(client, account.headers, name="other"))["id"]
    ev = Ev(other)
    await store(conn, None, None, [ev])
    mine = await store_delivery(conn, other, ev.id, created_at=at("2025-03-11T00:00:00"))
    assert [d["id"] for d in await _all(client, account, other)] == [mine]
    assert mine not in {d["id"] for d in await _all(client, account, endpoint, limit=100)}


async def test_invalid_parameters_are_400_naming_them(client, account, endpoint, attempts):
    for params, name in (
        ({"success": "maybe"}, "success"),
        ({"success": "null"}, "success"),  # Litestar reads "null" as None for a `bool | None`: not a boolean
        ({"success": "1"}, "success"),
        ({"source": "null"}, "source"),
        ({"source": "retry"}, "source"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"cursor": "garbage"}, "cursor"),
        ({"destination_id": "ep_01KAAAAAAAAAAAAAAAAAAAAAA1"}, "destination_id"),
        ({"destination_id": "dst_<script>"}, "destination_id"),
    ):
        resp = await client.get(f"/v1/endpoints/{endpoint}/deliveries", params=params, headers=account.headers)
        assert_error(resp, 400, "validation_error", field=name)


async def test_a_cursor_of_another_list_is_400(client, account, endpoint, conn):
    await store(conn, None, None, [Ev(endpoint, received_at=at("2025-01-01T00:00:00")), Ev(endpoint)])
    events_cursor = (await client.get(f"/v1/endpoints/{endpoint}/events?limit=1", headers=account.headers)).json()[
        "next_cursor"
    ]
    assert events_cursor
    resp = await client.get(
        f"/v1/endpoints/{endpoint}/deliveries", params={"cursor": events_cursor}, headers=account.headers
    )
    assert_error(resp, 400, "validation_error", field="cursor")


async def test_unknown_or_foreign_endpoint_is_404(client, account, other_account, endpoint):
    assert_error(
        await client.get(f"/v1/endpoints/{endpoint}/deliveries", headers=other_account.headers), 404, "not_found"
    )
    assert_error(await client.get("/v1/endpoints/ep_nope/deliveries", headers=account.headers), 404, "not_found")
    assert_error(await client.get("/v1/endpoints/ep_%00/deliveries", headers=account.headers), 404, "not_found")
    assert_error(await client.get(f"/v1/endpoints/{endpoint}/deliveries"), 401, "unauthorized")


async def test_the_schema_documents_the_retry_state(client):
    """``retry`` (one of its states) and ``next_attempt_at`` (a date-time or null) on every Delivery."""
    schemas = (await client.get("/schema/openapi.json")).json()["components"]["schemas"]
    fields = schemas["Delivery"]["properties"]
    assert fields["retry"]["enum"] == ["scheduled", "in_flight", "held", "gave_up", "retried", "none"]
    assert {"type": "string", "format": "date-time"} in fields["next_attempt_at"]["oneOf"]
    assert {"type": "null"} in fields["next_attempt_at"]["oneOf"]
