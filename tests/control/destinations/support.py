"""What the destination-API modules share: record fields, a sample tree, the idle health, and helpers that
add, list and fetch destinations and read an endpoint's rules."""

from __future__ import annotations

from typing import Any

DESTINATION_FIELDS = {
    "id",
    "endpoint_id",
    "name",
    "url",
    "headers",
    "sign_deliveries",
    "propagate_trace",
    "rate_limit_per_s",
    "ordering",
    "ordering_key",
    "deduplicate_window_s",
    "created_at",
    "updated_at",
    "transform",
    "transform_crashed_at",
    "transform_crash",
    "transform_slowed_at",
    "transform_slowed_s",
    "auth",
    "tls_ca",
    "signing_scheme",
    "signing_public_key",
    "previous_secret_expires_at",
    "previous_public_key",
    "state",
    "disabled_reason",
    "disabled_at",
}


TREE = {
    "op": "AND",
    "children": [
        {"field": "body.type", "operator": "equals", "value": "invoice.paid"},
        {"field": "header.X-Shop-Topic", "operator": "exists"},
    ],
}


def list_path(endpoint: dict[str, Any]) -> str:
    return f"/v1/endpoints/{endpoint['id']}/destinations"


async def add(client, account, endpoint: dict[str, Any], **body: Any) -> Any:
    body.setdefault("url", "https://example.com/hooks")
    return await client.post(list_path(endpoint), json=body, headers=account.headers)


async def added(client, account, endpoint: dict[str, Any], **body: Any) -> dict[str, Any]:
    resp = await add(client, account, endpoint, **body)
    assert resp.status_code == 201, resp.text
    made = resp.json()
    assert made.pop("signing_secret").startswith("whsec_")  # in the create answer only
    return made


async def listed(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(list_path(endpoint), headers=account.headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert set(body) == {"destinations"}
    return body["destinations"]


async def rules_of(client, account, endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    resp = await client.get(f"/v1/endpoints/{endpoint['id']}/rules", headers=account.headers)
    assert resp.status_code == 200, resp.text
    return resp.json()["rules"]


IDLE_HEALTH = {
    "attempts": 0,
    "succeeded": 0,
    "failed": 0,
    "success_rate": None,
    "latency_ms": {"p50": None, "p95": None, "p99": None},
    "last_status": None,
    "last_attempt_at": None,
    "consecutive_failures": 0,
    "circuit": "closed",
    "reopens_at": None,
    "paused_until": None,
    "fifo_waiting": 0,
    "held": 0,
}
"""The ``health`` of a destination nothing was delivered to (tests/workers/stats/ covers the rest)."""


async def fetched(client, headers: dict[str, str], destination_id: str) -> dict[str, Any]:
    """GET /v1/destinations/{id}: the record without its ``health``, which must be that of an idle one."""
    resp = await client.get(f"/v1/destinations/{destination_id}", headers=headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body.pop("health") == IDLE_HEALTH
    return body
