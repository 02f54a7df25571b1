"""/v1/schemas and /v1/endpoints/{id}/schemas over HTTP: record shapes, content types, 400 for a bad
version, lang, framework or provider, 404 across accounts, and correlations linking schemas that share ids."""

from __future__ import annotations

import pytest

from control.db.context import Context
from tests.conftest import make_account
from tests.helpers import assert_error, create_endpoint
from tests.schemas.support import flush, record

SCHEMA_FIELDS = {
    "id",
    "provider",
    "event_type",
    "endpoint_id",
    "current_version",
    "version",
    "version_count",
    "sample_count",
    "first_seen_at",
    "last_seen_at",
    "fields",
}


async def test_routes(client, account, other_account, ctx: Context) -> None:
    ep = (await create_endpoint(client, account.headers))["id"]
    paid = [{"type": "invoice.paid", "id": f"in_{i}", "customer": f"cus_{i % 4}", "total": 10 + i} for i in range(120)]
    signups = [{"type": "user.created", "data": {"user_id": f"cus_{i}", "email": f"u{i}@x.io"}} for i in range(4)]
    await flush(ctx, [record(ep, b) for b in paid] + [record(ep, b, provider="identity") for b in signups])
    await flush(ctx, [record(ep, {**paid[0], "total": 1.5})])  # integer → number, after the warm-up: version 2

    listed = await client.get("/v1/schemas", headers=account.headers)
    assert listed.status_code == 200, listed.text
    by_type = {s["event_type"]: s for s in listed.json()["schemas"]}
    invoice = by_type["invoice.paid"]
    assert set(invoice) == SCHEMA_FIELDS
    assert (invoice["current_version"], invoice["version_count"], invoice["sample_count"]) == (2, 2, 121)
    assert {f["path"]: f["types"] for f in invoice["fields"]}["total"] == ["number"]
    sid = invoice["id"]
    only = await client.get("/v1/schemas", params={"provider": "identity"}, headers=account.headers)
    assert [s["event_type"] for s in only.json()["schemas"]] == ["user.created"]
    on_ep = await client.get(f"/v1/endpoints/{ep}/schemas", headers=account.headers)
    assert {s["id"] for s in on_ep.json()["schemas"]} == {s["id"] for s in listed.json()["schemas"]}

    v1 = (await client.get(f"/v1/schemas/{sid}", params={"version": "1"}, headers=account.headers)).json()
    assert (v1["version"], v1["current_version"]) == (1, 2)
    assert {f["path"]: f["types"] for f in v1["fields"]}["total"] == ["integer"]
    versions = (await client.get(f"/v1/schemas/{sid}/versions", headers=account.headers)).json()["versions"]
    assert [(v["version"], v["sample_count"]) for v in versions] == [(2, 1), (1, 120)]
    diff = (await client.get(f"/v1/schemas/{sid}/diff", headers=account.headers)).json()
    assert (diff["from"], diff["to"]) == (1, 2)
    assert [(c["path"], c["change"], c["breaking"]) for c in diff["changes"]] == [("total", "type_changed", True)]
    assert diff["changes"][0]["before"]["types"] == ["integer"]

    ts = await client.get(f"/v1/schemas/{sid}/types", headers=account.headers)
    assert ts.status_code == 200
    assert ts.headers["content-type"].startswith("application/typescript")
    assert "export interface PaymentsInvoicePaid {" in ts.text
    schema = await client.get(f"/v1/schemas/{sid}/types", params={"lang": "json-schema"}, headers=account.headers)
    assert schema.headers["content-type"].startswith("application/schema+json")
    assert schema.json()["properties"]["total"] == {"type": "number"}
    handler = await client.get(
        f"/v1/schemas/{sid}/types", params={"framework": "express", "version": "1"}, headers=account.headers
    )
    assert "express.raw(" in handler.text
    assert "total: z.int()" in handler.text

    keys = (await client.get(f"/v1/schemas/{sid}/correlations", headers=account.headers)).json()
    ranked = {c["path"]: c for c in keys["candidates"]}
    assert next(iter(ranked)) in ("customer", "id")
    assert ranked["id"]["distinct_ratio"] == pytest.approx(120 / 121, abs=1e-3)  # in_0 came twice
    assert ranked["customer"]["distinct_ratio"] == pytest.approx(4 / 121, abs=1e-3)
    links = {(link["event_type"], link["path"]): link["shared_values"] for link in ranked["customer"]["links"]}
    assert links == {("user.created", "data.user_id"): 4}

    for path, params, field in [
        (f"/v1/schemas/{sid}", {"version": "abc"}, "version"),
        (f"/v1/schemas/{sid}", {"version": "0"}, "version"),
        (f"/v1/schemas/{sid}/diff", {"from": "x"}, "from"),
        (f"/v1/schemas/{sid}/diff", {"to": "-1"}, "to"),
        (f"/v1/schemas/{sid}/types", {"lang": "python"}, "lang"),
        (f"/v1/schemas/{sid}/types", {"framework": "django"}, "framework"),
        ("/v1/schemas", {"event_type": "x" * 201}, "event_type"),
        (f"/v1/schemas/{sid}/correlations", {"version": "1.5"}, "version"),
        ("/v1/schemas", {"provider": "no-such-provider"}, "provider"),
        ("/v1/schemas", {"event_type": "a\u0000b"}, "event_type"),
    ]:
        assert_error(
            await client.get(path, params=params, headers=account.headers), 400, "validation_error", field=field
        )
    # A provider's alias names its kind (the provider catalog): `stripe` lists the payments schemas.
    as_alias = await client.get("/v1/schemas", params={"provider": "stripe"}, headers=account.headers)
    as_kind = await client.get("/v1/schemas", params={"provider": "payments"}, headers=account.headers)
    assert as_alias.status_code == as_kind.status_code == 200
    assert as_alias.json() == as_kind.json()
    assert as_kind.json()["schemas"]
    assert_error(
        await client.get(f"/v1/schemas/{sid}", params={"version": "9"}, headers=account.headers), 404, "not_found"
    )

    for path in (
        f"/v1/schemas/{sid}",
        f"/v1/schemas/{sid}/versions",
        f"/v1/schemas/{sid}/diff",
        f"/v1/schemas/{sid}/types",
        f"/v1/schemas/{sid}/correlations",
        f"/v1/endpoints/{ep}/schemas",
        "/v1/schemas/sch_nope",
    ):
        assert_error(await client.get(path, headers=other_account.headers), 404, "not_found")
    assert (await client.get("/v1/schemas", headers=other_account.headers)).json() == {"schemas": []}
    assert (await client.get("/v1/schemas")).status_code == 401


async def test_an_account_sees_only_its_schemas(client, database_url: str, ctx: Context) -> None:
    first, second = await make_account(database_url), await make_account(database_url)
    ep = (await create_endpoint(client, first.headers))["id"]
    await flush(ctx, [record(ep, {"type": "a.b", "id": "1"})])
    assert len((await client.get("/v1/schemas", headers=first.headers)).json()["schemas"]) == 1
    assert (await client.get("/v1/schemas", headers=second.headers)).json()["schemas"] == []
