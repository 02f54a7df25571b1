"""Label rules: /v1/endpoints/{id}/labels and /v1/labels/{id}, and the flush labelling every new event with
them (before routing, searchable with ``q``, readable by conditions as ``meta.label.<key>``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control.db.context import Context, Principal
from control.routing.route import Router
from control.service.events.read import event_filters, list_events
from control.service.labels import MAX_LABEL_RULES, PALETTE, default_color
from control.workers.flush import Flush
from shared import ids
from shared.wire import IngestRecord, encode_records
from tests.conftest import JSON_HEADERS, ingest_record, make_account
from tests.helpers import assert_error, create_endpoint, parse_ts

LABEL_FIELDS = {"id", "endpoint_id", "source", "path", "output_key", "color", "created_at"}


async def _label(client: Any, headers: dict[str, str], endpoint_id: str, **body: Any) -> Any:
    return await client.post(f"/v1/endpoints/{endpoint_id}/labels", json=body, headers=headers)


async def test_create_list_get_update_delete(client, account) -> None:
    endpoint = await create_endpoint(client, account.headers)
    resp = await _label(client, account.headers, endpoint["id"], path="data.object.customer", output_key="customer")
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert set(created) == LABEL_FIELDS
    assert ids.is_id(created["id"], "lbl")
    assert (created["source"], created["path"], created["output_key"]) == ("body", "data.object.customer", "customer")
    assert created["color"] == default_color("customer")
    assert created["color"] in PALETTE
    parse_ts(created["created_at"])

    header = await _label(
        client,
        account.headers,
        endpoint["id"],
        source="header",
        path="X-Shop-Shop-Domain",
        output_key="shop",
        color="#ABCDEF",
    )
    assert header.status_code == 201, header.text
    assert (header.json()["path"], header.json()["color"]) == ("x-shop-shop-domain", "#abcdef")

    listed = (await client.get(f"/v1/endpoints/{endpoint['id']}/labels", headers=account.headers)).json()
    assert [label["output_key"] for label in listed["labels"]] == ["customer", "shop"]
    got = await client.get(f"/v1/labels/{created['id']}", headers=account.headers)
    assert got.json() == created

    patched = await client.patch(
        f"/v1/labels/{created['id']}", json={"path": "data.object.id", "color": "#000000"}, headers=account.headers
    )
    assert patched.status_code == 200, patched.text
    assert (patched.json()["path"], patched.json()["color"], patched.json()["output_key"]) == (
        "data.object.id",
        "#000000",
        "customer",
    )
    deleted = await client.delete(f"/v1/labels/{created['id']}", headers=account.headers)
    assert deleted.json() == {"id": created["id"], "deleted": True}
    assert_error(await client.get(f"/v1/labels/{created['id']}", headers=account.headers), 404, "not_found")
    assert_error(await client.delete(f"/v1/labels/{created['id']}", headers=account.headers), 404, "not_found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"path": "a..b", "output_key": "k"}, "path"),
        ({"path": "", "output_key": "k"}, "path"),
        ({"path": "a\u0000b", "output_key": "k"}, "path"),
        ({"source": "header", "path": "x y", "output_key": "k"}, "path"),
        ({"source": "query", "path": "a", "output_key": "k"}, "source"),
        ({"path": "a", "output_key": "a.b"}, "output_key"),
        ({"path": "a", "output_key": "x" * 65}, "output_key"),
        ({"path": "a", "output_key": "k", "color": "red"}, "color"),
        ({"path": "a", "output_key": "k", "colour": "#000000"}, "colour"),
        ({"output_key": "k"}, "path"),
    ],
)
async def test_bad_rules_are_400_naming_the_field(client, account, body, field) -> None:
    endpoint = await create_endpoint(client, account.headers)
    assert_error(await _label(client, account.headers, endpoint["id"], **body), 400, "validation_error", field=field)
    listed = (await client.get(f"/v1/endpoints/{endpoint['id']}/labels", headers=account.headers)).json()
    assert listed == {"labels": []}


async def test_keys_are_unique_per_endpoint_and_rules_limited(client, account) -> None:
    endpoint = await create_endpoint(client, account.headers)
    first = (await _label(client, account.headers, endpoint["id"], path="a", output_key="k")).json()
    dup = await _label(client, account.headers, endpoint["id"], path="b", output_key="k")
    assert_error(dup, 400, "validation_error", field="output_key")
    other = (await _label(client, account.headers, endpoint["id"], path="b", output_key="other")).json()
    renamed = await client.patch(f"/v1/labels/{other['id']}", json={"output_key": "k"}, headers=account.headers)
    assert_error(renamed, 400, "validation_error", field="output_key")
    # the same key on another endpoint is fine
    second = await create_endpoint(client, account.headers)
    assert (await _label(client, account.headers, second["id"], path="a", output_key="k")).status_code == 201
    # a path that is a body path cannot become a header's without being valid as one
    key_path = await client.patch(f"/v1/labels/{first['id']}", json={"path": "a.b/c"}, headers=account.headers)
    assert key_path.status_code == 200  # a body key may hold "/"; a header name may not
    bad = await client.patch(f"/v1/labels/{first['id']}", json={"source": "header"}, headers=account.headers)
    assert_error(bad, 400, "validation_error", field="path")
    for i in range(MAX_LABEL_RULES - 2):
        assert (await _label(client, account.headers, endpoint["id"], path="x", output_key=f"k{i}")).status_code == 201
    over = await _label(client, account.headers, endpoint["id"], path="x", output_key="one_more")
    assert_error(over, 400, "validation_error")


async def test_other_accounts_and_read_only_keys(client, account, other_account, database_url) -> None:
    endpoint = await create_endpoint(client, account.headers)
    label = (await _label(client, account.headers, endpoint["id"], path="a", output_key="k")).json()
    for resp in (
        await client.get(f"/v1/endpoints/{endpoint['id']}/labels", headers=other_account.headers),
        await _label(client, other_account.headers, endpoint["id"], path="a", output_key="j"),
        await client.get(f"/v1/labels/{label['id']}", headers=other_account.headers),
        await client.patch(f"/v1/labels/{label['id']}", json={"path": "b"}, headers=other_account.headers),
        await client.delete(f"/v1/labels/{label['id']}", headers=other_account.headers),
        await client.get("/v1/labels/lbl_nope", headers=account.headers),
    ):
        assert_error(resp, 404, "not_found")
    reader = await make_account(database_url, read_only=True)
    reader_endpoint = await create_endpoint(client, account.headers)  # any endpoint: the key is refused first
    assert_error(
        await _label(client, reader.headers, reader_endpoint["id"], path="a", output_key="k"), 403, "forbidden"
    )
    assert_error(await client.get("/v1/endpoints/ep_x/labels"), 401, "unauthorized")


# -- the flush labels ---------------------------------------------------------------------------------------


def _record(endpoint_id: str, body: object, headers: list[tuple[bytes, bytes]] | None = None) -> IngestRecord:
    """An ingest record whose body is ``body`` (bytes as they are, anything else as JSON)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return ingest_record(endpoint_id, raw, headers=headers or JSON_HEADERS)


async def _flush(ctx: Context, records: list[IngestRecord]) -> None:
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    flush = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0, router=Router(ctx))
    await flush.ensure_groups()
    while await flush.step():
        pass


async def _labels_of(ctx: Context, event_ids: list[str]) -> dict[str, list[dict[str, str]]]:
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, labels FROM events WHERE id = ANY($1::text[])", event_ids)
    return {row["id"]: row["labels"] for row in rows}


async def test_the_flush_labels_new_events_before_routing(client, account, ctx: Context) -> None:
    endpoint = await create_endpoint(client, account.headers)
    before = _record(endpoint["id"], {"data": {"customer": "cus_early"}})
    await _flush(ctx, [before])  # stored before any rule: never labelled (labels are not retroactive)
    for body in (
        {"path": "data.customer", "output_key": "customer"},
        {"path": "data.amount", "output_key": "amount"},
        {"path": "data.paid", "output_key": "paid"},
        {"path": "data.tags", "output_key": "tags"},
        {"path": "data.items.1.sku", "output_key": "second_sku"},
        {"path": "data.note", "output_key": "note"},
        {"source": "header", "path": "X-Shop-Shop-Domain", "output_key": "shop", "color": "#112233"},
    ):
        assert (await _label(client, account.headers, endpoint["id"], **body)).status_code == 201
    full = _record(
        endpoint["id"],
        {
            "data": {
                "customer": "cus_42",
                "amount": 2000,
                "paid": True,
                "tags": ["a", {"b": 1}],
                "items": [{"sku": "s1"}, {"sku": "s2"}],
                "note": "n\u0000" + "x" * 300,
            }
        },
        headers=[(b"content-type", b"application/json"), (b"x-shop-shop-domain", b"acme.example")],
    )
    sparse = _record(endpoint["id"], {"data": {"customer": None, "amount": 1.5}})
    not_json = _record(endpoint["id"], b"\xff not json", headers=[(b"x-shop-shop-domain", b"b.example")])
    # a rule that routes on a label: only events labelled customer=cus_42 go to the destination
    tree = {"op": "AND", "children": [{"field": "meta.label.customer", "operator": "equals", "value": "cus_42"}]}
    routed_by_label = await client.post(
        f"/v1/endpoints/{endpoint['id']}/destinations",
        json={"url": "http://127.0.0.1:9/sink", "condition_tree": tree},
        headers=account.headers,
    )
    assert routed_by_label.status_code == 201, routed_by_label.text
    await _flush(ctx, [full, sparse, not_json])

    labels = await _labels_of(ctx, [before.id, full.id, sparse.id, not_json.id])
    assert labels[before.id] == []
    by_key = {label["key"]: label for label in labels[full.id]}
    assert [label["key"] for label in labels[full.id]] == [
        "customer",
        "amount",
        "paid",
        "tags",
        "second_sku",
        "note",
        "shop",
    ]
    assert {k: v["value"] for k, v in by_key.items()} == {
        "customer": "cus_42",
        "amount": "2000",
        "paid": "true",
        "tags": '["a",{"b":1}]',
        "second_sku": "s2",
        "note": ("n\ufffd" + "x" * 300)[:200],
        "shop": "acme.example",
    }
    assert by_key["shop"]["color"] == "#112233"
    assert by_key["customer"]["color"] == default_color("customer")
    assert labels[sparse.id] == [{"key": "amount", "value": "1.5", "color": default_color("amount")}]
    assert labels[not_json.id] == [{"key": "shop", "value": "b.example", "color": "#112233"}]

    async with ctx.pool.acquire() as conn:
        routed = await conn.fetch("SELECT event_id FROM delivery_tasks WHERE endpoint_id = $1", endpoint["id"])
        account_id = await conn.fetchval("SELECT account_id FROM endpoints WHERE id = $1", endpoint["id"])
    assert [r["event_id"] for r in routed] == [full.id]

    principal = Principal(account_id=account_id, key_id="k", kind="live")
    for q, expected in (("CUS_42", [full.id]), ("acme.exam", [full.id]), ("b.example", [not_json.id])):
        found = await list_events(ctx, principal, endpoint["id"], event_filters(q=q), limit=10, cursor=None)
        assert [e.id for e in found.events] == expected, q
    api_event = (await client.get(f"/v1/events/{full.id}", headers=account.headers)).json()
    assert api_event["labels"][0] == {"key": "customer", "value": "cus_42", "color": default_color("customer")}
