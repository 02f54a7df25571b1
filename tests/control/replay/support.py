"""What the replay modules share: the payments secret, a stored event, and a replay over /v1."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import Account
from tests.events_support import Ev, store
from tests.helpers import create_endpoint, db

OUTCOME_FIELDS = {
    "id",
    "status",
    "latency_ms",
    "success",
    "sent_headers",
    "response_body",
    "response_body_encoding",
    "error",
    "transform",
    "trace_id",
    "span_id",
}


async def stored_event(client: AsyncTestClient, account: Account, database_url: str, **fields: Any) -> dict[str, str]:
    endpoint = await create_endpoint(client, account.headers)
    ev = Ev(endpoint_id=endpoint["id"], **fields)
    async with db(database_url) as conn:
        await store(conn, None, None, [ev])
    return {"endpoint": endpoint["id"], "event": ev.id}
