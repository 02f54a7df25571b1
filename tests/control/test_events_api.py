"""GET /v1/endpoints/{id}/events, .../events/latest and /v1/events/{id}: shape, filters, paging, errors."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta

import pytest

from shared import ids
from shared.keys import Keys
from tests.events_support import EVENT_FIELDS, Ev, at, live_app, series, store, store_delivery
from tests.helpers import assert_error, create_endpoint, db, parse_ts, redis_client


async def _ids(client, account, endpoint_id, **params):
    resp = await client.get(
        f"/v1/endpoints/{endpoint_id}/events", params={"limit": 100, **params}, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["next_cursor"] is None
    return [e["id"] for e in resp.json()["events"]]


# -- shape ------------------------------------------------------------------------------------------


async def test_event_record_has_every_field(client, account, endpoint, conn):
    ev = Ev(
        endpoint,
        method="PUT",
        path="/orders/7",
        query="a=1&b=2",
        headers={"content-type": "application/json", "pay-signature": "t=1,v1=ab"},
        body=b'{"type": "invoice.paid", "id": "in_1"}',
        source_ip="2001:db8::1",
        provider="payments",
        event_type="invoice.paid",
        idempotency_key="in_1",
        signature_valid=False,
        signature_failure_reason="signature_mismatch",
        ip_allowed=True,
        labels=[{"key": "customer", "value": "cus_9", "color": "blue"}],
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    await store(conn, None, None, [ev])
    resp = await client.get(f"/v1/endpoints/{endpoint}/events", headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"events", "next_cursor"}
    assert body["next_cursor"] is None
    [event] = body["events"]
    assert set(event) == EVENT_FIELDS
    assert event == {
        "id": ev.id,
        "endpoint_id": endpoint,
        "method": "PUT",
        "path": "/orders/7",
        "query": "a=1&b=2",
        "headers": {"content-type": "application/json", "pay-signature": "t=1,v1=ab"},
        "header_encodings": {},
        "body": '{"type": "invoice.paid", "id": "in_1"}',
        "body_encoding": "utf8",
        "body_size": 38,
        "body_expired": False,
        "content_type": "application/json",
        "source_ip": "2001:db8::1",
        "provider": "payments",
        "event_type": "invoice.paid",
        "idempotency_key": "in_1",
        "signature_valid": False,
        "signature_failure_reason": "signature_mismatch",
        "ip_allowed": True,
        "received_at": event["received_at"],
        "labels": [{"key": "customer", "value": "cus_9", "color": "blue"}],
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "handshake": False,
    }
    assert parse_ts(event["received_at"]) == ev.received_at


async def test_trace_id_is_shown_only_for_a_sampled_trace(client, account, endpoint, conn):
    """An event stored with an unsampled context (``-00``), or none (tracing off), has no trace to look up."""
    unsampled = Ev(endpoint, traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02")
    untraced = Ev(endpoint)
    await store(conn, None, None, [unsampled, untraced])
    resp = await client.get(f"/v1/endpoints/{endpoint}/events", headers=account.headers)
    assert [e["trace_id"] for e in resp.json()["events"]] == [None, None]


async def test_non_utf8_body_comes_back_base64_and_exact(client, account, endpoint, conn):
    raw = b"\xff\xfe\x00binary\x80 payload\x00"
    binary, empty, text = (
        Ev(endpoint, body=raw),
        Ev(endpoint, body=b"", method="GET"),
        Ev(endpoint, body="héllo ✓".encode()),
    )
    await store(conn, None, None, [binary, empty, text])
    events = {
        e["id"]: e
        for e in (await client.get(f"/v1/endpoints/{endpoint}/events", headers=account.headers)).json()["events"]
    }
    assert events[binary.id]["body_encoding"] == "base64"
    assert base64.b64decode(events[binary.id]["body"], validate=True) == raw
    assert (events[empty.id]["body"], events[empty.id]["body_encoding"]) == (None, "utf8")
    assert (events[text.id]["body"], events[text.id]["body_encoding"]) == ("héllo ✓", "utf8")


# -- filters ----------------------------------------------------------------------------------------


@pytest.fixture
async def mixed(endpoint, conn):
    """Twelve events over three days that differ in every filtered field."""
    specs = [
        ("2025-03-09T23:59:59.999999", "payments", "invoice.paid", "POST", True),
        ("2025-03-10T00:00:00", "payments", "charge.refunded", "POST", False),
        ("2025-03-10T08:30:00", "commerce", "orders/create", "POST", True),
        ("2025-03-10T12:00:00", "commerce", "orders/paid", "PUT", None),
        ("2025-03-10T12:00:00", "identity", "user.created", "POST", True),
        ("2025-03-10T23:59:59.999999", "identity", "user.created", "DELETE", False),
        ("2025-03-11T00:00:00", "code_host", "push", "POST", True),
        ("2025-03-11T09:15:00", None, None, "GET", None),
        ("2025-03-11T10:00:00", "payments", "invoice.paid", "PATCH", True),
        ("2025-03-11T11:00:00", None, None, "POST", None),
        ("2025-03-12T00:00:00", "payments", "invoice.paid", "POST", False),
        ("2025-03-12T06:00:00", "commerce", "orders/create", "GET", True),
    ]
    events = [
        Ev(endpoint, received_at=at(t), provider=p, event_type=et, method=m, signature_valid=sv)
        for t, p, et, m, sv in specs
    ]
    await store(conn, None, None, events)
    return events


def _newest_first(events):
    return [e.id for e in sorted(events, key=lambda e: (e.received_at, e.id), reverse=True)]


FILTER_CASES = [
    ({"provider": "payments"}, lambda e: e.provider == "payments"),
    ({"provider": "code_host"}, lambda e: e.provider == "code_host"),
    ({"provider": "Stripe"}, lambda e: e.provider == "payments"),  # an alias, any case
    ({"type": "orders/create"}, lambda e: e.event_type == "orders/create"),
    ({"type": "invoice"}, lambda e: False),
    ({"method": "post"}, lambda e: e.method == "POST"),
    ({"method": "Delete"}, lambda e: e.method == "DELETE"),
    ({"signature_valid": "true"}, lambda e: e.signature_valid is True),
    ({"signature_valid": "false"}, lambda e: e.signature_valid is False),
    ({"since": "2025-03-11"}, lambda e: e.received_at >= at("2025-03-11T00:00:00")),
    ({"until": "2025-03-10"}, lambda e: e.received_at < at("2025-03-11T00:00:00")),
    ({"since": "2025-03-10", "until": "2025-03-10"}, lambda e: e.received_at.date().isoformat() == "2025-03-10"),
    ({"since": "2025-03-10T12:00:00Z"}, lambda e: e.received_at >= at("2025-03-10T12:00:00")),
    ({"until": "2025-03-10T12:00:00Z"}, lambda e: e.received_at <= at("2025-03-10T12:00:00")),
    ({"since": "2025-03-10T12:00:00"}, lambda e: e.received_at >= at("2025-03-10T12:00:00")),  # no zone: UTC
    ({"since": "2025-03-10T14:00:00+02:00"}, lambda e: e.received_at >= at("2025-03-10T12:00:00")),
    ({"until": "2025-03-10T23:59:59.999999Z"}, lambda e: e.received_at < at("2025-03-11T00:00:00")),
    ({"since": "2025-03-10T08:30:00.000001Z"}, lambda e: e.received_at > at("2025-03-10T08:30:00")),
    (
        {"provider": "payments", "signature_valid": "true", "method": "post"},
        lambda e: e.provider == "payments" and e.signature_valid is True and e.method == "POST",
    ),
    (
        {"type": "invoice.paid", "since": "2025-03-10", "until": "2025-03-11T23:00:00Z"},
        lambda e: e.event_type == "invoice.paid" and at("2025-03-10") <= e.received_at <= at("2025-03-11T23:00"),
    ),
    (
        {"provider": "commerce", "method": "GET", "since": "2025-03-12"},
        lambda e: e.provider == "commerce" and e.method == "GET",
    ),
    ({"provider": "identity", "signature_valid": "false", "type": "user.created"}, lambda e: e.method == "DELETE"),
]


async def test_each_filter_alone_and_combined(client, account, endpoint, mixed):
    for params, keep in FILTER_CASES:
        expected = _newest_first([e for e in mixed if keep(e)])
        assert await _ids(client, account, endpoint, **params) == expected, params


async def test_filters_apply_across_pages(client, account, endpoint, mixed):
    expected = _newest_first([e for e in mixed if e.method == "POST"])
    seen, cursor = [], None
    while True:
        params = {"method": "POST", "limit": 2} | ({"cursor": cursor} if cursor else {})
        body = (await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)).json()
        seen += [e["id"] for e in body["events"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == expected


async def test_q_searches_body_content_type_method_event_type_and_labels(client, account, endpoint, conn):
    events = {
        "body": Ev(endpoint, body=b'{"customer": "Ada LOVELACE"}'),
        "ctype": Ev(endpoint, content_type="application/X-WWW-Form-Urlencoded", body=b"a=1"),
        "method": Ev(endpoint, method="PATCH", body=b"{}"),
        "type": Ev(endpoint, event_type="Customer.Subscription.Deleted", body=b"{}"),
        "label": Ev(endpoint, body=b"{}", labels=[{"key": "plan", "value": "Enterprise-Gold", "color": "gold"}]),
        "percent": Ev(endpoint, body=b"discount 100% off"),
        "plain": Ev(endpoint, body=b"discount 1000 off"),
        "under": Ev(endpoint, body=b"order_id=5"),
        "similar": Ev(endpoint, body=b"orderXid=5"),
        "backslash": Ev(endpoint, body=b"C:\\temp\\x"),
    }
    await store(conn, None, None, events.values())

    async def q(text):
        return set(await _ids(client, account, endpoint, q=text))

    assert await q("ada lovelace") == {events["body"].id}
    assert await q("x-www-form") == {events["ctype"].id}
    assert await q("patch") == {events["method"].id}
    assert await q("SUBSCRIPTION.deleted") == {events["type"].id}
    assert await q("enterprise-gold") == {events["label"].id}
    assert await q("100%") == {events["percent"].id}
    assert await q("100") == {events["percent"].id, events["plain"].id}
    assert await q("order_id") == {events["under"].id}
    assert await q("%") == {events["percent"].id}
    assert await q("_") == {events["under"].id}
    assert await q("\\temp") == {events["backslash"].id}
    assert await q("no such text") == set()
    assert await q("discount") == await q("DISCOUNT")


async def test_q_combines_with_other_filters(client, account, endpoint, conn):
    a = Ev(endpoint, body=b"hello", provider="payments")
    b = Ev(endpoint, body=b"hello", provider="commerce")
    await store(conn, None, None, [a, b])
    assert await _ids(client, account, endpoint, q="HELLO", provider="commerce") == [b.id]


# -- paging -----------------------------------------------------------------------------------------


async def test_pagination_is_stable_while_events_arrive(settings, account, conn):
    """Keyset pages over a few hundred events (ties on received_at included) while newer events are
    inserted concurrently: every original event exactly once, in order."""
    base = datetime.now(UTC) - timedelta(hours=1)
    async with live_app(settings) as (client, _), redis_client(settings.redis_url) as redis:
        endpoint = (await create_endpoint(client, account.headers))["id"]
        times = series(base, 150, timedelta(milliseconds=7)) * 2  # every instant twice: ties broken by id
        original = [Ev(endpoint, received_at=t) for t in times]
        await store(conn, None, None, original)
        keys = Keys(settings.redis_prefix)
        pages_done = asyncio.Event()
        inserted_while_paging = []

        async def keep_inserting():
            async with db(settings.database_url) as writer:
                while not pages_done.is_set():
                    inserted_while_paging.extend(await store(writer, redis, keys, [Ev(endpoint) for _ in range(3)]))
                    await asyncio.sleep(0)

        writer = asyncio.create_task(keep_inserting())
        seen, cursor, pages = [], None, 0
        try:
            while True:
                params = {"limit": 37} | ({"cursor": cursor} if cursor else {})
                resp = await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)
                assert resp.status_code == 200, resp.text
                body = resp.json()
                assert len(body["events"]) <= 37
                seen += [e["id"] for e in body["events"]]
                pages += 1
                cursor = body["next_cursor"]
                if cursor is None:
                    break
                # besides the free-running writer, certainly one newer event between every two pages
                inserted_while_paging += await store(conn, redis, keys, [Ev(endpoint)])
        finally:
            pages_done.set()
            await writer
    assert pages > 8
    assert len(inserted_while_paging) >= pages - 1
    assert len(seen) == len(set(seen)), "an event was repeated"
    older = [i for i in seen if i in {e.id for e in original}]
    assert older == _newest_first(original), "gaps or wrong order among the events present from the start"
    newer = [i for i in seen if i not in {e.id for e in original}]
    assert seen[: len(newer)] == newer  # whatever arrived before the first page sits on top of it


async def test_next_cursor_is_null_exactly_on_the_last_page(client, account, endpoint, conn):
    await store(conn, None, None, [Ev(endpoint, received_at=t) for t in series(at("2025-01-01T00:00:00"), 4)])
    first = (await client.get(f"/v1/endpoints/{endpoint}/events?limit=2", headers=account.headers)).json()
    assert len(first["events"]) == 2
    assert first["next_cursor"]
    second = (
        await client.get(
            f"/v1/endpoints/{endpoint}/events",
            params={"limit": 2, "cursor": first["next_cursor"]},
            headers=account.headers,
        )
    ).json()
    assert len(second["events"]) == 2
    assert second["next_cursor"] is None
    empty = (
        await client.get(f"/v1/endpoints/{endpoint}/events", params={"since": "2030-01-01"}, headers=account.headers)
    ).json()
    assert empty == {"events": [], "next_cursor": None}


async def test_default_limit_is_20(client, account, endpoint, conn):
    await store(conn, None, None, [Ev(endpoint, received_at=t) for t in series(at("2025-01-01T00:00:00"), 21)])
    body = (await client.get(f"/v1/endpoints/{endpoint}/events", headers=account.headers)).json()
    assert len(body["events"]) == 20
    assert body["next_cursor"]


# -- errors -----------------------------------------------------------------------------------------


INVALID_CASES = [
    ({"limit": "0"}, "limit"),
    ({"limit": "101"}, "limit"),
    ({"limit": "x"}, "limit"),
    ({"limit": "-5"}, "limit"),
    ({"cursor": "garbage"}, "cursor"),
    ({"cursor": "!!!"}, "cursor"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2025-13-01"}, "since"),
    ({"until": "2025-03-10T25:00:00Z"}, "until"),
    ({"since": "2025-03-11", "until": "2025-03-10"}, "until"),
    ({"provider": "strpe"}, "provider"),  # `stripe` is an alias of payments (the provider catalog)
    ({"signature_valid": "maybe"}, "signature_valid"),
    ({"method": "PO ST"}, "method"),
    ({"q": "x" * 201}, "q"),
    ({"type": "a\x00b"}, "type"),
]


async def test_invalid_parameters_are_400_naming_them(client, account, endpoint):
    for params, name in INVALID_CASES:
        resp = await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)
        assert_error(resp, 400, "validation_error", field=name)
        if name not in ("limit", "cursor"):
            resp = await client.get(f"/v1/endpoints/{endpoint}/events/latest", params=params, headers=account.headers)
            assert_error(resp, 400, "validation_error", field=name)


async def test_tampered_and_foreign_cursors_are_400(client, account, endpoint, conn):
    await store(conn, None, None, [Ev(endpoint, received_at=t) for t in series(at("2025-01-01T00:00:00"), 3)])
    cursor = (await client.get(f"/v1/endpoints/{endpoint}/events?limit=1", headers=account.headers)).json()[
        "next_cursor"
    ]
    flipped = cursor[:5] + ("A" if cursor[5] != "A" else "B") + cursor[6:]
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    foreign = base64.urlsafe_b64encode(b"dlv" + raw[3:]).decode().rstrip("=")
    for bad in (flipped, cursor[:-2], cursor + "AA", foreign):
        resp = await client.get(f"/v1/endpoints/{endpoint}/events", params={"cursor": bad}, headers=account.headers)
        assert_error(resp, 400, "validation_error", field="cursor")


async def test_unknown_or_foreign_endpoint_is_404_on_every_route(client, account, other_account, endpoint):
    for path in ("events", "events/latest", "events/wait?timeout=1", "deliveries"):
        for who, endpoint_id in ((account, "ep_01JAAAAAAAAAAAAAAAAAAAAAAA"), (other_account, endpoint)):
            resp = await client.get(f"/v1/endpoints/{endpoint_id}/{path}", headers=who.headers)
            assert_error(resp, 404, "not_found")
    resp = await client.get(f"/v1/endpoints/{endpoint}/events")
    assert_error(resp, 401, "unauthorized")


# -- latest and by id -------------------------------------------------------------------------------


async def test_latest_returns_the_newest_match_with_its_deliveries(client, account, endpoint, conn):
    old = Ev(endpoint, received_at=at("2025-03-10T10:00:00"), event_type="invoice.paid")
    new = Ev(endpoint, received_at=at("2025-03-10T11:00:00"), event_type="invoice.paid")
    other = Ev(endpoint, received_at=at("2025-03-10T12:00:00"), event_type="charge.refunded")
    await store(conn, None, None, [old, new, other])
    t0 = at("2025-03-10T11:00:01")
    d2 = await store_delivery(conn, endpoint, new.id, created_at=t0 + timedelta(seconds=5), attempt_number=2)
    d1 = await store_delivery(conn, endpoint, new.id, created_at=t0, success=False, attempt_number=1, error="timeout")
    await store_delivery(conn, endpoint, old.id, created_at=t0)

    resp = await client.get(
        f"/v1/endpoints/{endpoint}/events/latest", params={"type": "invoice.paid"}, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == EVENT_FIELDS | {"deliveries"}
    assert body["id"] == new.id
    assert [d["id"] for d in body["deliveries"]] == [d1, d2]
    assert body["deliveries"][0]["error"] == "timeout"
    assert body["deliveries"][0]["success"] is False

    resp = await client.get(f"/v1/endpoints/{endpoint}/events/latest", headers=account.headers)
    assert resp.json()["id"] == other.id
    assert resp.json()["deliveries"] == []


async def test_latest_is_404_when_nothing_matches(client, account, endpoint, conn):
    resp = await client.get(f"/v1/endpoints/{endpoint}/events/latest", headers=account.headers)
    assert_error(resp, 404, "not_found")
    await store(conn, None, None, [Ev(endpoint, provider="payments")])
    resp = await client.get(f"/v1/endpoints/{endpoint}/events/latest?provider=commerce", headers=account.headers)
    assert_error(resp, 404, "not_found")


async def test_get_event_by_id_with_deliveries_and_tenant_isolation(client, account, other_account, endpoint, conn):
    second = (await create_endpoint(client, account.headers, name="second"))["id"]
    ev = Ev(second, received_at=at("2025-03-10T10:00:00"), body=b"\x00\xff")
    await store(conn, None, None, [ev, Ev(endpoint)])
    created = at("2025-03-10T10:00:01")
    first = await store_delivery(conn, second, ev.id, created_at=created, source="rule")
    replay = await store_delivery(conn, second, ev.id, created_at=created + timedelta(minutes=1), source="replay")

    resp = await client.get(f"/v1/events/{ev.id}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == EVENT_FIELDS | {"deliveries"}
    assert (body["id"], body["endpoint_id"]) == (ev.id, second)
    assert base64.b64decode(body["body"]) == b"\x00\xff"
    assert [(d["id"], d["source"]) for d in body["deliveries"]] == [(first, "rule"), (replay, "replay")]
    assert body["deliveries"][1]["destination_id"] is None

    assert_error(await client.get(f"/v1/events/{ev.id}", headers=other_account.headers), 404, "not_found")
    assert_error(await client.get(f"/v1/events/{ids.new_id('evt')}", headers=account.headers), 404, "not_found")
    assert_error(await client.get("/v1/events/evt_%00", headers=account.headers), 404, "not_found")
    assert_error(await client.get("/v1/endpoints/ep_%00/events", headers=account.headers), 404, "not_found")
