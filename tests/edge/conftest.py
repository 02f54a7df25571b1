"""The edge (``edge/``): the raw ASGI app in process against the test Redis, its pipelining RESP connection, its
endpoint config cache and what control writes for it, the redis-py cluster internals it routes by, and one
real ``hookyard edge`` process as providers meet it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from edge.app import EdgeApp
from shared.settings import Settings, load_settings
from tests.conftest import Servers
from tests.edge.support import http, started_edge


@pytest.fixture
def edge_settings(servers: Servers, redis_prefix: str) -> Settings:
    """What an edge process loads: Redis and the test's key prefix, no database (the edge never has one)."""
    return load_settings({}, redis_url=servers.redis_url, redis_prefix=redis_prefix)


@pytest.fixture
async def edge_app(edge_settings: Settings) -> AsyncIterator[EdgeApp]:
    """The edge app in process, started (its Redis connections and config listener) and stopped."""
    async with started_edge(edge_settings) as app:
        yield app


@pytest.fixture
async def edge_client(edge_app: EdgeApp) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client calling that app in process (ASGI), as ``http://edge.test`` (``client`` is control's)."""
    async with http(edge_app) as c:
        yield c
