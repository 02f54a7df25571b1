"""The control plane in process (the Litestar app on the test's database and Redis prefix): every /v1 resource,
/api/start and /api/register, /inbox, /llms.txt, the MCP catalog, the error envelope, and the database's
migrations and partitions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from shared.keys import Keys
from shared.settings import Settings
from tests.conftest import Account
from tests.events_support import live_app, store
from tests.helpers import create_endpoint, db, redis_client


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the test's database with hookyard's jsonb codec, for writing rows directly."""
    async with db(database_url) as connection:
        yield connection


@pytest.fixture
async def endpoint(client: Any, account: Account) -> str:
    """The id of an endpoint of ``account``, created over /v1."""
    return (await create_endpoint(client, account.headers))["id"]


@dataclass
class Live:
    client: Any
    app: Any
    wakeups: Any
    endpoint: str
    channel: str
    conn: Any
    redis: Any
    keys: Keys
    database_url: str

    async def announce(self, *events):
        """Stores the events and publishes their ids, as the flush worker does."""
        return await store(self.conn, self.redis, self.keys, events)

    async def kill_pubsub(self):
        """Drops the app's pub/sub connection server-side, as a Redis restart or network cut would."""
        generation = self.wakeups.generation
        for conn in await self.redis.client_list():
            if conn.get("name") == self.wakeups.client_name:
                await self.redis.client_kill_filter(_id=conn["id"])
        return generation

    async def unsubscribed(self):
        return (await self.redis.pubsub_numsub(self.channel))[0][1] == 0


def waiting(live, count=1, calls=()):
    """A condition: ``count`` waiters are registered on the endpoint and its subscription is live
    (and none of ``calls`` ended early, which would make the wait for it pointless)."""

    async def check():
        for call in calls:
            if call.done():
                raise AssertionError(f"a wait ended early: {call.result().status_code} {call.result().text}")
        return live.wakeups.waiter_count(live.channel) >= count and live.wakeups.is_subscribed(live.channel)

    return check


@pytest.fixture
async def live(settings: Settings, account: Account) -> AsyncIterator[Live]:
    """The app in this loop (its lifespan run, so its pub/sub wakeups listen), an endpoint of ``account``, a
    database connection and Redis: what the long-poll tests drive."""
    async with (
        live_app(settings) as (client, app),
        db(settings.database_url) as conn,
        redis_client(settings.redis_url) as redis,
    ):
        endpoint = (await create_endpoint(client, account.headers))["id"]
        keys = Keys(settings.redis_prefix)
        channel = keys.event_channel(endpoint)
        yield Live(client, app, app.state.wakeups, endpoint, channel, conn, redis, keys, settings.database_url)


def wait_scope(live, account: Account, query: bytes, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    """The ASGI scope of a raw ``GET`` of the endpoint's ``events/wait``, for tests that drive the app's
    ``receive`` and ``send`` themselves (a client leaving, the answer's exact messages)."""
    path = f"/v1/endpoints/{live.endpoint}/events/wait"
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [
            (b"host", b"testserver.local"),
            (b"authorization", account.headers["Authorization"].encode()),
            *headers,
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver.local", 80),
    }
