"""The edge (``edge/``): the raw ASGI app in process against the test Redis, its pipelining RESP connection, its
endpoint config cache and what control writes for it, the redis-py cluster internals it routes by, and one
real ``hookyard edge`` process as providers meet it."""

from __future__ import annotations

import pytest

from shared.settings import Settings, load_settings
from tests.conftest import Servers


@pytest.fixture
def edge_settings(servers: Servers, redis_prefix: str) -> Settings:
    """What an edge process loads: Redis and the test's key prefix, no database (the edge never has one)."""
    return load_settings({}, redis_url=servers.redis_url, redis_prefix=redis_prefix)
