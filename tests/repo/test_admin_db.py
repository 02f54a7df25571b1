"""Every test's database is created and dropped on one kept connection per test process (``tests.admin_db``),
not on two new ones: each new connection is a Postgres backend started."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from tests.admin_db import AdminConnection
from tests.conftest import Servers


async def _backends(servers: Servers, name: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(servers.database_url)
    try:
        query = "SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = $1"
        return await conn.fetch(query, name)
    finally:
        await conn.close()


async def test_databases_are_made_and_dropped_on_one_kept_connection(servers: Servers) -> None:
    name = f"hy-admin-test-{uuid.uuid4().hex[:8]}"
    admin = AdminConnection(servers.database_url, name)
    try:
        seen = set()
        for _ in range(3):
            database = f"hy_a_{uuid.uuid4().hex[:12]}"
            await admin.execute(f"CREATE DATABASE {database}", f"DROP DATABASE {database}")
            seen |= {tuple(row) for row in await _backends(servers, name)}
        assert len(seen) == 1, seen

        ((pid, _),) = seen  # one the server closed meanwhile is made again
        conn = await asyncpg.connect(servers.database_url)
        try:
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
        finally:
            await conn.close()
        for _ in range(250):  # gone from the server, and the kept connection's loop has seen it close
            if not await _backends(servers, name):
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        database = f"hy_a_{uuid.uuid4().hex[:12]}"
        await admin.execute(f"CREATE DATABASE {database}", f"DROP DATABASE {database}")
        assert [row["pid"] for row in await _backends(servers, name)] not in ([], [pid])
    finally:
        admin.close()
