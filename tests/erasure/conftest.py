"""What the erasure tests share: events stored by the real flush (labels, schemas and delivery tasks made
as in production), delivery records holding the events' bodies, and the erasures loop run to its end."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from control.workers.erasures.loop import Erasures
from control.workers.loop import run_loops
from tests.events_support import store_delivery
from tests.helpers import create_endpoint, db
from tests.schemas.support import flush, record

__all__ = ("Made", "erase", "events_of", "make_endpoint", "run_erasures", "stored")


@dataclass
class Made:
    endpoint_id: str
    event_ids: list[str]


async def make_endpoint(client: Any, account: Any, *, label: bool = True) -> str:
    """An endpoint labelling ``customer`` from ``data.object.customer``, with a destination for every event."""
    endpoint_id = (await create_endpoint(client, account.headers, name="people"))["id"]
    base = f"/v1/endpoints/{endpoint_id}"
    if label:
        body = {"path": "data.object.customer", "output_key": "customer"}
        assert (await client.post(f"{base}/labels", json=body, headers=account.headers)).status_code == 201
    body = {"url": "http://127.0.0.1:9/hook", "forward_all": True}
    assert (await client.post(f"{base}/destinations", json=body, headers=account.headers)).status_code == 201
    return endpoint_id


async def stored(
    ctx: Any, endpoint_id: str, bodies: list[Any], headers: list[dict[str, str]] | None = None
) -> list[str]:
    """Flushes the bodies (JSON unless bytes) as payments events, and records one delivery per event whose
    request and response carry the body; answers the event ids in order."""
    records = []
    for i, body in enumerate(bodies):
        extra = [(k.encode(), v.encode()) for k, v in (headers[i] if headers else {}).items()]
        kw = {"headers": [(b"content-type", b"application/json"), *extra]} if extra else {}
        records.append(record(endpoint_id, body, event_type="invoice.paid", **kw))
    await flush(ctx, records)
    raw = [body if isinstance(body, bytes) else json.dumps(body).encode() for body in bodies]
    async with db(ctx.settings.database_url) as conn:
        for r, body in zip(records, raw, strict=True):
            await store_delivery(
                conn, endpoint_id, r.id, created_at=datetime.now(UTC), request_body=body, response_body=body
            )
    return [r.id for r in records]


async def erase(client: Any, account: Any, endpoint_id: str, field: str, value: Any) -> dict[str, Any]:
    resp = await client.post(
        f"/v1/endpoints/{endpoint_id}/events/erase", json={"field": field, "value": value}, headers=account.headers
    )
    assert resp.status_code == 202, resp.text
    return resp.json()


async def run_erasures(ctx: Any, *, workers: int = 1, page: int = 1000) -> None:
    """The erasures loop(s) in burst mode: until no job moves."""
    await run_loops([Erasures(ctx, page=page) for _ in range(workers)], asyncio.Event(), burst=True)


async def events_of(database_url: str, endpoint_id: str) -> set[str]:
    async with db(database_url) as conn:
        return {r["id"] for r in await conn.fetch("SELECT id FROM events WHERE endpoint_id = $1", endpoint_id)}


@pytest.fixture
async def conn(database_url: str):
    async with db(database_url) as connection:
        yield connection
