"""Fixtures of the bad-input walk: settings with room for hundreds of requests a second, one object of each
kind (so every route reaches its validation, not a 404), and the OpenAPI document walked."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.settings import Settings, load_settings
from tests.control.bad_input.walk import TREE
from tests.events_support import Ev, store, store_delivery
from tests.helpers import db
from tests.schemas.support import flush, record
from tests.stack import free_port


@pytest.fixture
def settings(servers, database_url: str, redis_prefix: str) -> Settings:
    """The suite's settings with room for the few hundred requests a test sends in a second or two."""
    return load_settings(
        {},
        database_url=database_url,
        redis_url=servers.redis_url,
        redis_prefix=redis_prefix,
        egress="any",
        rate_limit_per_s=100_000,
        rate_limit_burst=100_000,
        start_rate_per_min=100_000,
    )


@pytest.fixture
async def made(client, account, database_url, ctx) -> dict[str, str]:
    """One of each object, so every route reaches its validation instead of a 404."""
    h = account.headers
    endpoint = (await client.post("/v1/endpoints", json={"name": "e"}, headers=h)).json()
    base = f"/v1/endpoints/{endpoint['id']}"
    destination = (await client.post(f"{base}/destinations", json={"url": "https://example.com/"}, headers=h)).json()
    # Replays with its destination_id go to its URL: a loopback port nobody listens on, refused at once.
    dead = f"http://127.0.0.1:{free_port()}/nobody"
    replay = (await client.post(f"{base}/destinations", json={"url": dead}, headers=h)).json()
    rule_body = {"name": "r", "condition_tree": TREE, "destination_ids": [destination["id"]]}
    rule = (await client.post(f"{base}/rules", json=rule_body, headers=h)).json()
    entry = (await client.post(f"{base}/allowlist", json={"cidr": "192.0.2.0/24"}, headers=h)).json()
    label = (await client.post(f"{base}/labels", json={"path": "a.b", "output_key": "k"}, headers=h)).json()
    async with db(database_url) as conn:
        (event_id,) = await store(conn, None, None, [Ev(endpoint["id"])])
        delivery_id = await store_delivery(conn, endpoint["id"], event_id, created_at=datetime.now(UTC), success=False)
    await flush(ctx, [record(endpoint["id"], {"type": "t", "id": "1"})])  # a learned schema
    async with db(database_url) as conn:
        schema_id = await conn.fetchval("SELECT id FROM schemas")
    retry = (await client.post(f"{base}/deliveries/retry", headers=h)).json()
    alerts = (await client.post("/v1/alert-destinations", json={"url": "https://example.com/a"}, headers=h)).json()
    erasure = (await client.post(f"{base}/events/erase", json={"field": "body.a", "value": "v"}, headers=h)).json()
    started = (await client.post("/api/start")).json()
    return {
        "api_token": started["api_token"],
        "endpoint_id": endpoint["id"],
        "destination_id": destination["id"],
        "replay_destination_id": replay["id"],
        "replay_url": dead,
        "rule_id": rule["id"],
        "entry_id": entry["id"],
        "label_id": label["id"],
        "schema_id": schema_id,
        "event_id": event_id,
        "delivery_id": delivery_id,
        "retry_id": retry["id"],
        "alert_destination_id": alerts["id"],
        "erasure_id": erasure["id"],
    }


@pytest.fixture
async def document(client) -> dict[str, Any]:
    resp = await client.get("/schema/openapi.json")
    assert resp.status_code == 200
    return resp.json()
