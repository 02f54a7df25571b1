"""What the transformed-delivery tests share: a destination made through /v1 and its task's delivery rows."""

from __future__ import annotations

from control.db.context import Context
from tests.destination import fetch_row
from tests.helpers import create_endpoint

__all__ = ("add_destination", "delivery_row", "has_attempts")


async def add_destination(client, account, url: str, transform: str | None) -> tuple[str, str, str]:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": url, "transform": transform}, headers=account.headers
    )
    assert resp.status_code == 201, resp.text
    assert resp.json()["transform"] == transform
    return endpoint, resp.json()["id"], resp.json()["signing_secret"]


async def has_attempts(ctx: Context, task_id: str, count: int) -> bool:
    row = await fetch_row(ctx, "SELECT count(*) AS n FROM deliveries WHERE task_id = $1", task_id)
    return row["n"] == count


async def delivery_row(ctx: Context, task_id: str) -> dict:
    row = await fetch_row(
        ctx,
        "SELECT request_body, success, response_status, error, transform FROM deliveries WHERE task_id = $1",
        task_id,
    )
    return dict(row)
