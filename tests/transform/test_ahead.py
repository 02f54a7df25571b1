"""A claim's transformed tasks run their transform before they take a send slot: as one job of the sandbox
pool per destination, and then they wait for their destination's slots like any task claimed ahead. Before,
each delivery's send task held its destination's slot while its own call waited in the pool: of the 32 a
destination may have in flight, 13-15 sat in the transform stage in ``bench delivery`` (issue 42, ADR 0060)."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from control.db.context import Context
from control.db.leased import LeasedTask
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, running, serving, settled
from tests.transform.backlog import transformed_backlog

TASKS = 24


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(
        settings, **FAST_DELIVERY, deliver_concurrency=32, deliver_per_destination=4, sandbox_processes=2
    )


async def test_transformed_tasks_hold_no_send_slot_while_their_transform_runs(ctx: Context) -> None:
    with serving() as sink:
        made = await transformed_backlog(ctx, sink.url, TASKS)
        first = made[0]
        async with running(ctx) as deliver:
            parked, in_pool, sending = 0, 0, 0
            done = asyncio.create_task(sink.wait_for(TASKS, timeout=60))
            while not done.done():  # every turn of the loop: what is parked, in the pool, sending
                parked = max(parked, deliver.transforms.parked)
                in_pool = max(in_pool, sum(deliver.transforms._by_account.values()))
                sending = max(sending, deliver._per_destination[first["destination"]])
                await asyncio.sleep(0)
            got = await done
            for task in made:
                await settled(ctx, task["task"], "succeeded")
    assert {g.headers["x-transformed"] for g in got} == {"1"}
    assert in_pool > 1  # their transforms ran in the pool, several at once
    assert parked == 0  # and no send (no slot of the destination's 4) waited for its own
    assert sending <= 4


async def test_tasks_transforming_ahead_leave_their_destination_room_to_claim(ctx: Context) -> None:
    """Tasks whose transform runs ahead hold no room of their destination's claims either: counted, they cut each
    claim of a busy transformed destination by a quarter in ``bench delivery`` (172 tasks a claim against 126), and
    more claims are more Postgres. What bounds them is their account's share of the pool (``crowded``)."""
    with serving() as sink:
        made = await transformed_backlog(ctx, sink.url, TASKS)
        destination = made[0]["destination"]
        async with running(ctx) as deliver:
            looked: list[tuple[int, int, int]] = []  # (tasks transforming ahead, what the caps compare, without them)
            transform_ahead = deliver._transform_ahead

            def noted(tasks: list[LeasedTask], claimed_at: float) -> None:
                transform_ahead(tasks, claimed_at)
                now = time.monotonic()
                plain = deliver._per_destination[destination] + deliver.ready.held(destination)
                held = deliver._held(now).get(destination, 0)
                looked.append((deliver._ahead[destination], held, plain - deliver.ready.ahead(destination, now)))

            deliver._transform_ahead = noted  # type: ignore[method-assign]  # watches the real calls, on this instance only
            await sink.wait_for(TASKS, timeout=60)
            for task in made:
                await settled(ctx, task["task"], "succeeded")
    assert looked
    assert all(ahead > 0 for ahead, _, _ in looked), looked
    assert all(held == without for _, held, without in looked), looked
