"""A delivery's pending retry, as the API and MCP show it: a failed attempt whose task will be tried again says
so (``retry: scheduled`` and ``next_attempt_at``, the task's own due time), the attempt being made says
``in_flight``, the last one ``gave_up`` (the earlier ones ``retried``), a 410's held task ``held``. Users in the
trials read a failed attempt as final until attempt #2 appeared. A real deliver loop, a loopback destination
made through /v1, the list, the event and the latest event read through /v1 and the MCP tool."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from control.db.context import Context
from shared.settings import Settings
from tests.destination import Reply, fetch_row, make_task, running, serving, settled
from tests.helpers import endpoint_with_destination, parse_ts, wait_for
from tests.mcp_client import posted_call

LATER = (60.0,)
"""One retry, a minute after the first attempt: it is still scheduled while the test reads it."""


@pytest.fixture
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    return msgspec.structs.replace(settings, retry_schedule_s=getattr(request, "param", LATER))


async def _views(client, account, made: dict[str, str]) -> list[list[dict[str, Any]]]:
    """The task's attempts, oldest first, as each read shows them: the endpoint's list, the event, the latest
    event and the MCP tool (every one the same service function's rows)."""
    h, endpoint = account.headers, made["endpoint"]
    listed = (await client.get(f"/v1/endpoints/{endpoint}/deliveries", headers=h)).json()["deliveries"]
    event = (await client.get(f"/v1/events/{made['event']}", headers=h)).json()["deliveries"]
    latest = (await client.get(f"/v1/endpoints/{endpoint}/events/latest", headers=h)).json()["deliveries"]
    result = await posted_call(client, account.key, "list_deliveries", endpoint_id=endpoint)
    assert result.get("isError") is not True, result
    tool = result["structuredContent"]["deliveries"]
    return [listed[::-1], event, latest, tool[::-1]]


def _states(views: list[list[dict[str, Any]]]) -> list[list[tuple[int, str, str | None]]]:
    return [[(d["attempt_number"], d["retry"], d["next_attempt_at"]) for d in view] for view in views]


async def _failing_task(ctx: Context, client, account, url: str) -> dict[str, str]:
    endpoint, destination = await endpoint_with_destination(client, account.headers, url)
    return await make_task(ctx, url, endpoint_id=endpoint, destination_id=destination["id"])


async def test_a_failed_attempt_shows_when_it_is_tried_again(ctx: Context, client, account) -> None:
    with serving() as sink:
        sink.reply(default=Reply(status=503))
        async with running(ctx):
            made = await _failing_task(ctx, client, account, sink.url)
            await sink.wait_for(1)
            task = await wait_for(lambda: _pending(ctx, made["task"]), timeout=10)
        views = await _views(client, account, made)
    due = task["next_attempt_at"]
    assert due > datetime.now(UTC) + timedelta(seconds=30)  # the schedule's minute, jittered
    for view in views:
        [attempt] = view
        assert (attempt["success"], attempt["retry"]) == (False, "scheduled")
        assert parse_ts(attempt["next_attempt_at"]) == due


@pytest.mark.parametrize("settings", [(0.05,)], indirect=True)
async def test_the_attempt_being_made_then_the_last_one_gave_up(ctx: Context, client, account) -> None:
    with serving() as sink:
        sink.reply(Reply(status=500), default=Reply(status=500, delay_s=1.0))
        async with running(ctx):
            made = await _failing_task(ctx, client, account, sink.url)
            await sink.wait_for(2)  # the second attempt is out, its answer a second away
            in_flight = await _views(client, account, made)
            await settled(ctx, made["task"], "failed")
        done = await _views(client, account, made)
    assert _states(in_flight) == [[(1, "in_flight", None)]] * 4
    assert _states(done) == [[(1, "retried", None), (2, "gave_up", None)]] * 4


async def test_a_gone_destination_holds_the_delivery(ctx: Context, client, account) -> None:
    """A 410 disables the destination and holds the task: enabling it sends the delivery again."""
    with serving() as sink:
        sink.reply(default=Reply(status=410))
        async with running(ctx):
            made = await _failing_task(ctx, client, account, sink.url)
            await settled(ctx, made["task"], "held")
        views = await _views(client, account, made)
    assert _states(views) == [[(1, "held", None)]] * 4


async def test_a_delivered_attempt_and_a_retry_by_hand(ctx: Context, client, account) -> None:
    """Delivered: nothing further. Asked for again by hand: scheduled now, on the attempt it was asked for."""
    with serving() as sink:
        async with running(ctx):
            made = await _failing_task(ctx, client, account, sink.url)
            await settled(ctx, made["task"], "succeeded")
        delivered = await _views(client, account, made)
        [[attempt], *_] = delivered
        asked = await client.post(f"/v1/deliveries/{attempt['id']}/retry", headers=account.headers)
        assert asked.status_code == 202, asked.text
        again = await _views(client, account, made)
    assert _states(delivered) == [[(1, "none", None)]] * 4
    assert [[(n, retry) for n, retry, _ in view] for view in _states(again)] == [[(1, "scheduled")]] * 4
    assert parse_ts(again[0][0]["next_attempt_at"]) == parse_ts(asked.json()["due_at"])


async def _pending(ctx: Context, task_id: str) -> Any:
    row = await fetch_row(ctx, "SELECT status, attempts, next_attempt_at FROM delivery_tasks WHERE id = $1", task_id)
    return row if (row["status"], row["attempts"]) == ("pending", 1) else None
