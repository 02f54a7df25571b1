"""Bulk retries through real processes: a ``hookyard worker retries`` killed mid-job and the job resumed by
another worker where the first left it; the worker command naming the loop; and the retry tools through the
official MCP client."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from control.workers import LOOP_NAMES
from shared.settings import Settings
from tests.delivery.retries_support import fail_deliveries, workers
from tests.destination import Destination, Reply
from tests.events_support import Ev, live_app
from tests.helpers import db, wait_for
from tests.mcp_client import call, connected
from tests.stack import Stack, hookyard_command

pytestmark = pytest.mark.slow


async def _endpoint(client: Any, account: Any, url: str) -> dict[str, str]:
    h = account.headers
    endpoint = (await client.post("/v1/endpoints", json={"name": "retries"}, headers=h)).json()
    body = {"url": url, "forward_all": True}
    made = (await client.post(f"/v1/endpoints/{endpoint['id']}/destinations", json=body, headers=h)).json()
    return {"endpoint": endpoint["id"], "destination": made["id"], "rule": made["rule"]["id"]}


async def test_a_worker_killed_mid_job_is_resumed_where_it_left_off(
    client, account, settings: Settings, database_url: str, destination: Destination, tmp_path: Path
) -> None:
    """A row lock on the task in the middle of the job's second page holds the worker inside that page's
    transaction; it is killed there. Its first page stays done, the second never happened, and the next
    worker carries on from the first page's cursor: every delivery is retried exactly once."""
    made = await _endpoint(client, account, destination.url)
    count = 2500
    async with db(database_url) as conn:
        failed = await fail_deliveries(
            conn,
            [Ev(made["endpoint"]) for _ in range(count)],
            destination_id=made["destination"],
            rule_id=made["rule"],
            url=destination.url,
        )
        ordered = [r["id"] for r in await conn.fetch("SELECT id FROM delivery_tasks ORDER BY id")]
    url = f"/v1/endpoints/{made['endpoint']}/deliveries/retry"
    job = (await client.post(url, params={"success": "false"}, headers=account.headers)).json()

    stack = Stack(settings, tmp_path)
    async with db(database_url) as holder, db(database_url) as conn:
        try:
            async with holder.transaction():
                await holder.execute("SELECT 1 FROM delivery_tasks WHERE id = $1 FOR UPDATE", ordered[1500])
                stack.start_worker("first", "retries")

                async def stuck_in_second_page() -> bool:
                    row = await conn.fetchrow(
                        "SELECT matched, queued, scanned_to FROM delivery_retry_jobs WHERE id = $1", job["id"]
                    )
                    waiting = await conn.fetchval(
                        """SELECT count(*) FROM pg_stat_activity
                            WHERE datname = current_database() AND wait_event_type = 'Lock'"""
                    )
                    return row["matched"] == 1000 and waiting == 1

                await wait_for(stuck_in_second_page, timeout=60, interval=0.05)
                stack.kill("first", signal.SIGKILL)
                left = await conn.fetchrow("SELECT * FROM delivery_retry_jobs WHERE id = $1", job["id"])
                assert (left["state"], left["matched"], left["queued"], left["done"]) == ("scanning", 1000, 1000, 0)
                assert left["scanned_to"] == ordered[999]
                assert await conn.fetchval("SELECT count(*) FROM delivery_retry_items") == 1000
            # The lock is gone; the killed worker's transaction rolls back as its backend finds no client.
            stack.start_worker("second", "retries", "deliver")

            async def completed() -> Any:
                row = await conn.fetchrow("SELECT * FROM delivery_retry_jobs WHERE id = $1", job["id"])
                return row if row["state"] == "completed" else None

            done = await wait_for(completed, timeout=90, interval=0.1)
        finally:
            stack.stop_all()
    assert (done["matched"], done["queued"], done["done"], done["failed"]) == (count, count, count, 0)
    sent = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
    assert sent == Counter({f.event_id: 1 for f in failed}), "each delivery retried exactly once"


def test_the_worker_command_names_the_retries_loop() -> None:
    """``hookyard up`` runs ``hookyard worker`` with no names: every loop, retries included."""
    assert "retries" in LOOP_NAMES
    shown = subprocess.run([*hookyard_command(), "worker", "--help"], capture_output=True, text=True, check=True).stdout
    for name in LOOP_NAMES:
        assert name in shown, f"`hookyard worker --help` does not name the {name} loop"


# -- the tools, through the official client ---------------------------------------------------------------


async def test_the_retry_tools(
    client, account, other_account, ctx, settings: Settings, database_url: str, destination: Destination
) -> None:
    made = await _endpoint(client, account, destination.url)
    async with db(database_url) as conn:
        failed = await fail_deliveries(
            conn,
            [Ev(made["endpoint"], event_type=t) for t in ("a", "a", "b")],
            destination_id=made["destination"],
            rule_id=made["rule"],
            url=destination.url,
        )
    destination.hold()
    async with live_app(settings) as (_, app), connected(app, account.key) as mcp:
        is_error, retry = await call(mcp, "retry_delivery", delivery_id=failed[2].delivery_id)
        assert not is_error, retry
        assert (retry["previous_status"], retry["attempt_number"]) == ("failed", 3)
        is_error, job = await call(mcp, "retry_deliveries", endpoint_id=made["endpoint"], type="a", success=False)
        assert not is_error, job
        assert (job["state"], job["filters"]["type"]) == ("scanning", "a")
        is_error, same = await call(mcp, "retry_deliveries", endpoint_id=made["endpoint"], type="a")
        assert same["id"] == job["id"], "a second call while the job runs returns that job"
        async with workers(ctx):
            # The single retry's attempt is held in flight; the job's two may arrive before it (both are due).
            async def retried_in_flight() -> bool:
                return failed[2].event_id in {r.headers["x-hookyard-event-id"] for r in destination.requests}

            await wait_for(retried_in_flight, timeout=10, interval=0.01)
            is_error, busy = await call(mcp, "retry_delivery", delivery_id=failed[2].delivery_id)
            assert is_error
            assert busy["error"]["code"] == "attempt_in_flight"
            destination.reply(default=Reply(status=200))
            destination.release()

            async def completed() -> Any:
                _, got = await call(mcp, "get_delivery_retry", retry_id=job["id"])
                return got if got["state"] == "completed" else None

            finished = await wait_for(completed, timeout=60, interval=0.05)
        assert (finished["matched"], finished["done"], finished["failed"]) == (2, 2, 0)
        is_error, refused = await call(mcp, "retry_deliveries", endpoint_id=made["endpoint"], success=True)
        assert is_error
        assert refused["error"]["code"] == "validation_error"
        assert refused["error"]["message"].startswith("success:")
    async with live_app(settings) as (_, app), connected(app, other_account.key) as mcp:
        for tool, arguments in (
            ("retry_delivery", {"delivery_id": failed[0].delivery_id}),
            ("retry_deliveries", {"endpoint_id": made["endpoint"]}),
            ("get_delivery_retry", {"retry_id": job["id"]}),
        ):
            is_error, envelope = await call(mcp, tool, **arguments)
            assert is_error
            assert envelope["error"]["code"] == "not_found", (tool, envelope)
    assert sorted(r.headers["x-hookyard-event-id"] for r in destination.requests) == sorted(f.event_id for f in failed)
