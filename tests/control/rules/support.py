"""What the rule-API modules share: a sample tree and its normalised form, and helpers that set up an
endpoint with destinations and create, list and fetch rules through the API."""

from __future__ import annotations

from typing import Any

from tests.helpers import create_endpoint

RULE_FIELDS = {"id", "endpoint_id", "name", "condition_tree", "destination_ids", "active", "created_at", "updated_at"}
TREE = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": "invoice.paid"},
        {
            "op": "OR",
            "children": [
                {"field": "header.X-Shop-Topic", "operator": "exists"},
                {"field": "body.amount", "operator": "equals", "value": 2000},
            ],
        },
    ],
}
NORMALISED = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": "invoice.paid"},
        {
            "op": "OR",
            "children": [
                {"field": "header.x-shop-topic", "operator": "exists"},
                {"field": "body.amount", "operator": "equals", "value": 2000},
            ],
        },
    ],
}
EVERYTHING = {"op": "AND", "children": []}


def list_path(endpoint: dict[str, Any]) -> str:
    return f"/v1/endpoints/{endpoint['id']}/rules"


async def destination(client, account, endpoint: dict[str, Any], name: str = "d") -> str:
    resp = await client.post(
        f"/v1/endpoints/{endpoint['id']}/destinations",
        json={"url": f"https://example.com/{name}", "name": name},
        headers=account.headers,
    )
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


async def setup(client, account, destinations: int = 2) -> tuple[dict[str, Any], list[str]]:
    made = await create_endpoint(client, account.headers)
    return made, [await destination(client, account, made, f"d{i}") for i in range(destinations)]


async def create(client, account, endpoint: dict[str, Any], **body: Any) -> Any:
    return await client.post(list_path(endpoint), json=body, headers=account.headers)


async def created(client, account, endpoint: dict[str, Any], **body: Any) -> dict[str, Any]:
    body.setdefault("name", "paid")
    body.setdefault("condition_tree", TREE)
    resp = await create(client, account, endpoint, **body)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def listed(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(list_path(endpoint), headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"rules"}
    return body["rules"]


async def fetched(client, account, rule: dict[str, Any]) -> dict[str, Any]:
    resp = await client.get(f"/v1/rules/{rule['id']}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()
