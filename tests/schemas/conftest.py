"""Schemas (``control.schemas``): learning in the real flush, the version rule, the typed fast path, the /v1
schema routes, and the generated code checked by the real tools (``tests/node``)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from control.db.context import Context, Principal
from control.routing.route import Router
from control.schemas.learn import Learner
from control.workers.flush import Flush
from control.workers.learn import Learn
from shared import ids
from shared.wire import IngestRecord, encode_records
from tests.conftest import ingest_record


async def make_endpoint(database_url: str, account_id: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        endpoint_id = ids.new_id("ep")
        await conn.execute(
            """INSERT INTO endpoints (id, account_id, name, environment, ingest_token, signing_secret)
               VALUES ($1, $2, 'schemas', 'production', $3, 'whsec_x')""",
            endpoint_id,
            account_id,
            ids.ingest_token(),
        )
    finally:
        await conn.close()
    return endpoint_id


def record(
    endpoint_id: str, body: Any, provider: str | None = "payments", event_type: str | None = None, **kw: Any
) -> IngestRecord:
    """An attributed ingest record of ``body`` (JSON unless bytes); its event type is the body's ``type``."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if event_type is None and provider is not None and isinstance(body, dict):
        event_type = body.get("type")
    return ingest_record(
        endpoint_id, raw, source_ip="203.0.113.9", provider=provider, event_type=event_type, id=ids.new_id("evt"), **kw
    )


async def flush(ctx: Context, records: list[IngestRecord], learner: Learner | None = None, per_entry: int = 50) -> None:
    for i in range(0, len(records), per_entry):
        await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records[i : i + per_entry])})
    step = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0, router=Router(ctx), learn=True)
    await step.ensure_groups()
    while await step.step():
        pass
    learn = Learn(ctx, learner=learner or Learner())  # what the flush noted, learned as the learn loop does
    while await learn.step():
        pass


def principal(account_id: str) -> Principal:
    return Principal(account_id=account_id, key_id="test", kind="live")
