"""Erasure through real processes and the official MCP client: a ``hookyard worker erasures`` killed in the
middle of a job, and the job resumed by another worker where the first left it, every event counted and
erased once; and the erasure tools over Streamable HTTP."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from shared.settings import Settings
from tests.erasure.conftest import erase, events_of, make_endpoint, run_erasures, stored
from tests.events_support import Ev, live_app, store
from tests.helpers import db, wait_for
from tests.mcp_client import call, connected
from tests.stack import Stack

pytestmark = pytest.mark.slow


async def test_a_worker_killed_mid_job_is_resumed_where_it_left_off(
    client, account, settings: Settings, database_url: str, tmp_path: Path
) -> None:
    """A row lock on a matching event in the job's second page holds the worker inside that page's
    transaction; it is killed there. The first page stays erased and counted, the second never happened,
    and the next worker carries on from the first page's cursor."""
    endpoint = await make_endpoint(client, account, label=False)
    count = 2500
    body = b'{"customer": "cus_alice"}'
    events = [Ev(endpoint, body=body if i % 2 else b'{"customer": "cus_bob"}') for i in range(count)]
    async with db(database_url) as conn:
        await store(conn, None, None, events)
        ordered = await conn.fetch("SELECT id, received_at, body FROM events ORDER BY received_at, id")
    held = next(r for r in ordered[1000:] if r["body"] == body)
    # Events made in the same microsecond sort by id, not by creation: count the first page as stored.
    first_page = sum(r["body"] == body for r in ordered[:1000])
    job = await erase(client, account, endpoint, "body.customer", "cus_alice")

    stack = Stack(settings, tmp_path)
    async with db(database_url) as holder, db(database_url) as conn:
        try:
            async with holder.transaction():
                await holder.execute(
                    "SELECT 1 FROM events WHERE id = $1 AND received_at = $2 FOR UPDATE",
                    held["id"],
                    held["received_at"],
                )
                stack.start_worker("first", "erasures")

                async def stuck_in_second_page() -> bool:
                    scanned = await conn.fetchval("SELECT scanned FROM erasure_jobs WHERE id = $1", job["id"])
                    waiting = await conn.fetchval(
                        """SELECT count(*) FROM pg_stat_activity
                            WHERE datname = current_database() AND wait_event_type = 'Lock'"""
                    )
                    return scanned == 1000 and waiting == 1

                await wait_for(stuck_in_second_page, timeout=60, interval=0.05)
                stack.kill("first", signal.SIGKILL)
                left = await conn.fetchrow("SELECT * FROM erasure_jobs WHERE id = $1", job["id"])
                assert (left["state"], left["stage"], left["scanned"]) == ("running", "events", 1000)
                assert left["matched"] == left["erased"] == first_page
                assert (left["scanned_at"], left["scanned_id"]) == (ordered[999]["received_at"], ordered[999]["id"])
            stack.start_worker("second", "erasures")

            async def done() -> Any:
                row = await conn.fetchrow("SELECT * FROM erasure_jobs WHERE id = $1", job["id"])
                return row if row["state"] == "completed" else None

            finished = await wait_for(done, timeout=90, interval=0.1)
        finally:
            stack.stop_all()
    assert (finished["scanned"], finished["matched"], finished["erased"]) == (count, count // 2, count // 2)
    assert finished["value"] is None
    kept = await events_of(database_url, endpoint)
    assert kept == {e.id for e in events if e.body != body}


async def test_the_erasure_tools(client, account, other_account, ctx, settings: Settings, database_url) -> None:
    endpoint = await make_endpoint(client, account)
    ids = await stored(ctx, endpoint, [{"type": "t", "data": {"object": {"customer": c}}} for c in ("a", "b", "a")])
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        is_error, job = await call(mcp, "erase_events", endpoint_id=endpoint, field="meta.label.customer", value="a")
        assert not is_error, job
        assert (job["state"], job["value"]) == ("pending", "a")
        await run_erasures(ctx)
        is_error, done = await call(mcp, "get_erasure", erasure_id=job["id"])
        assert (done["state"], done["matched"], done["erased"], done["value"]) == ("completed", 2, 2, None)
        is_error, listed = await call(mcp, "list_erasures", endpoint_id=endpoint)
        assert [e["id"] for e in listed["erasures"]] == [job["id"]]
        is_error, refused = await call(mcp, "erase_events", endpoint_id=endpoint, field="body.a", value={"x": 1})
        assert is_error
        assert refused["error"]["code"] == "validation_error"
        assert refused["error"]["message"].startswith("value"), refused
    async with live_app(settings) as (_, app), connected(app, other_account.key) as mcp:
        for tool, arguments in (
            ("erase_events", {"endpoint_id": endpoint, "field": "body.a", "value": "x"}),
            ("get_erasure", {"erasure_id": job["id"]}),
        ):
            is_error, envelope = await call(mcp, tool, **arguments)
            assert is_error
            assert envelope["error"]["code"] == "not_found", (tool, envelope)
    assert await events_of(database_url, endpoint) == {ids[1]}
