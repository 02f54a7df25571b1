"""What the stats modules share: the circuit settings the fixtures use, and helpers that record, flush and
read stats."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from control.db.context import Context
from control.workers.flush import Flush
from shared.wire import IngestRecord, encode_records
from tests.conftest import ingest_record

THRESHOLD, COOLDOWN_S = 3, 1.0


def record_at(endpoint_id: str, at: datetime, provider: str | None = None, event_type: str | None = None, **kw: Any):
    """An ingest record received ``at``, attributed to ``provider`` and ``event_type`` (the body names it too)."""
    body = b'{"type":"%s"}' % (event_type or "none").encode()
    at_us = int(at.timestamp() * 1_000_000)
    return ingest_record(
        endpoint_id, body, at_us=at_us, source_ip="203.0.113.9", provider=provider, event_type=event_type, **kw
    )


async def flush_records(ctx: Context, flush: Flush, records: list[IngestRecord]) -> None:
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records)})
    while await flush.step():
        pass


async def read_stats(client: Any, headers: dict[str, str], endpoint_id: str) -> dict[str, Any]:
    resp = await client.get(f"/v1/endpoints/{endpoint_id}/stats", headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()
