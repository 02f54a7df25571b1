"""Deleting a destination deletes its delivery tasks through the tasks' key, which leads with the destination
(migration 0029), not by reading every task of the instance: a busy instance keeps its retention's worth of
them, and the delete (an API call, or an endpoint's) took a scan of the whole table."""

from __future__ import annotations

import asyncpg

from tests.helpers import create_endpoint, db


async def _scans(conn: asyncpg.Connection) -> tuple[int, int]:
    """(sequential, index) scans of delivery_tasks so far, this session's own counts flushed first."""
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await conn.execute("SELECT 1")  # the flush happens at this statement's end
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    row = await conn.fetchrow("SELECT seq_scan, idx_scan FROM pg_stat_user_tables WHERE relname = 'delivery_tasks'")
    return row["seq_scan"], row["idx_scan"] or 0


async def _destination(client, account, endpoint: str) -> str:
    created = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": "http://127.0.0.1:9/hook", "forward_all": True},
        headers=account.headers,
    )
    assert created.status_code == 201, created.text
    return created.json()["id"]


async def _tasks(
    conn: asyncpg.Connection, endpoint: str, destination: str, count: int, prefix: str, *, spread: bool = False
) -> None:
    """``count`` tasks to ``destination``, or ``spread`` over 200 destinations named after it (as an instance's
    tasks are spread over its destinations; tasks have no foreign key)."""
    await conn.execute(
        """INSERT INTO delivery_tasks (id, endpoint_id, event_id, event_received_at, rule_id, destination_id, status)
           SELECT $4 || lpad(i::text, 8, '0'), $1, 'evt_' || $4 || i, now(), 'rule_1',
                  CASE WHEN $5 THEN $2 || (i % 200) ELSE $2 END,
                  CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'succeeded' END
             FROM generate_series(1, $3) i""",
        endpoint,
        destination,
        count,
        prefix,
        spread,
    )


async def test_a_destination_delete_reads_only_its_own_tasks(client, account, database_url) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    gone = await _destination(client, account, endpoint)
    async with db(database_url) as conn:
        await _tasks(conn, endpoint, "dst_elsewhere_", 50_000, "task_k", spread=True)
        await _tasks(conn, endpoint, gone, 30, "task_g")
        await conn.execute("ANALYZE delivery_tasks")
        seq_before, idx_before = await _scans(conn)

        await conn.execute("DELETE FROM destinations WHERE id = $1", gone)

        seq_after, idx_after = await _scans(conn)
        left = await conn.fetch("SELECT destination_id = $1 AS gone, count(*) FROM delivery_tasks GROUP BY 1", gone)
    assert {r["gone"]: r["count"] for r in left} == {False: 50_000}
    assert seq_after == seq_before, "the delete read the whole of delivery_tasks"
    assert idx_after > idx_before


async def test_an_endpoint_delete_removes_its_destinations_tasks_and_no_other(client, account, database_url) -> None:
    endpoint, other = [(await create_endpoint(client, account.headers))["id"] for _ in range(2)]
    first, second = await _destination(client, account, endpoint), await _destination(client, account, endpoint)
    elsewhere = await _destination(client, account, other)
    async with db(database_url) as conn:
        for prefix, destination, owner in (("task_a", first, endpoint), ("task_b", second, endpoint)):
            await _tasks(conn, owner, destination, 20, prefix)
        await _tasks(conn, other, elsewhere, 20, "task_c")
    deleted = await client.delete(f"/v1/endpoints/{endpoint}", headers=account.headers)
    assert deleted.status_code == 200, deleted.text
    async with db(database_url) as conn:
        left = await conn.fetch("SELECT destination_id, count(*) FROM delivery_tasks GROUP BY 1")
    assert {r["destination_id"]: r["count"] for r in left} == {elsewhere: 20}
