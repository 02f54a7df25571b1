"""A finished delivery task outlives a retention shorter than the longest deduplication window: it is what tells
a later copy of its webhook that the webhook was delivered. Removed at a one-day retention, the owner of a
key would be missing, and a copy arriving within the destination's window would wait out the window and then
be sent after all."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import msgspec

from control.db import dedup
from control.workers.sweep.retention import expire_records
from shared import ids
from tests.events_support import store_task

WEEK_S = 7 * 86_400


def _ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


def _retaining(ctx, days: int):
    return dataclasses.replace(ctx, settings=msgspec.structs.replace(ctx.settings, retention_days=days))


async def _destination(client, account, endpoint: str) -> str:
    created = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": "http://127.0.0.1:9/hook", "forward_all": True, "deduplicate_window_s": WEEK_S},
        headers=account.headers,
    )
    assert created.status_code == 201, created.text
    return created.json()["id"]


async def _task(conn, endpoint: str, destination: str, *, created: float, finished: float, status: str) -> str:
    event_id = ids.new_id("evt", int(_ago(created).timestamp() * 1000))
    task = await store_task(
        conn,
        endpoint_id=endpoint,
        event_id=event_id,
        received_at=_ago(created),
        rule_id="rule_1",
        destination_id=destination,
        created_at=_ago(created),
        status=status,
    )
    await conn.execute("UPDATE delivery_tasks SET attempts = 1, updated_at = $2 WHERE id = $1", task, _ago(finished))
    return task


async def _ask(conn, endpoint: str, destination: str, key: str) -> tuple[str, str]:
    """A copy of the webhook, claimed now, asks for its key: (decision, owner event)."""
    copy = await _task(conn, endpoint, destination, created=0, finished=0, status="in_flight")
    event_id = await conn.fetchval("SELECT event_id FROM delivery_tasks WHERE id = $1", copy)
    ask = dedup.Ask(copy, 1, destination, key, event_id, endpoint, "rule_1", None, None, ids.new_id("dlv"))
    return (await dedup.decide(conn, [ask]))[copy]


async def test_a_copy_within_the_window_is_skipped_after_a_short_retention_ran(client, account, endpoint, conn, ctx):
    destination = await _destination(client, account, endpoint)
    owner = await _task(conn, endpoint, destination, created=3, finished=3, status="succeeded")
    owner_event = await conn.fetchval("SELECT event_id FROM delivery_tasks WHERE id = $1", owner)
    await conn.execute(
        """INSERT INTO delivery_dedup (destination_id, idempotency_key, task_id, event_id, taken_at)
           VALUES ($1, 'pi_3MtwBwLkdIwHu7ix28a3tqPa', $2, $3, $4)""",
        destination,
        owner,
        owner_event,
        _ago(3),
    )

    gone = await expire_records(_retaining(ctx, 1))

    assert (gone.tasks, gone.finished) == (0, True)
    assert await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE id = $1", owner) == 1
    assert await _ask(conn, endpoint, destination, "pi_3MtwBwLkdIwHu7ix28a3tqPa") == ("skip", owner_event)


async def test_finished_tasks_go_a_week_after_they_finished_whatever_the_retention(
    client, account, endpoint, conn, ctx
):
    destination = await _destination(client, account, endpoint)
    gone_at_one_day = await _task(conn, endpoint, destination, created=9, finished=8, status="succeeded")
    failed_long_ago = await _task(conn, endpoint, destination, created=8, finished=7.5, status="failed")
    finished_lately = await _task(conn, endpoint, destination, created=10, finished=2, status="succeeded")
    within_the_week = await _task(conn, endpoint, destination, created=2, finished=2, status="succeeded")

    gone = await expire_records(_retaining(ctx, 1))

    assert (gone.tasks, gone.finished) == (2, True)
    left = {r["id"] for r in await conn.fetch("SELECT id FROM delivery_tasks")}
    assert left == {finished_lately, within_the_week}
    assert not left & {gone_at_one_day, failed_long_ago}

    # At the default retention (30 days) a task created before it but finished within the week stays too.
    old_but_lately_finished = await _task(conn, endpoint, destination, created=40, finished=3, status="failed")
    assert (await expire_records(ctx)).tasks == 0
    assert await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE id = $1", old_but_lately_finished) == 1
