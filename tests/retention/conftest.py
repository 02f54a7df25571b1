"""Fixtures of the retention tests: a connection to the test's database and an endpoint of its account."""

from __future__ import annotations

import pytest

from tests.helpers import create_endpoint, db


@pytest.fixture
async def conn(database_url):
    async with db(database_url) as connection:
        yield connection


@pytest.fixture
async def endpoint(client, account):
    return (await create_endpoint(client, account.headers))["id"]
