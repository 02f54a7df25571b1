"""SIGTERM to a real ``hookyard worker deliver`` process: an idle worker exits at once, not at its poll (its
step waited ``deliver_poll_s`` for a wakeup the stop did not give), and a send in flight is let finish and
recorded once before the exit."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from control.db.context import Context
from shared.settings import Settings
from tests.delivery_shaping.support import limited_tasks
from tests.destination import Destination, Reply, fetch_row, serving
from tests.helpers import wait_for
from tests.stack import Stack

POLL_S = 5.0
SLOW_S = 1.0
"""How long the slow destination takes to answer."""


async def _attempts(ctx: Context, destination_id: str) -> list[tuple[int, int | None]]:
    """(attempt number, status) of every recorded attempt to the destination."""
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT attempt_number, response_status FROM deliveries WHERE destination_id = $1 ORDER BY created_at",
            destination_id,
        )
    return [(r["attempt_number"], r["response_status"]) for r in rows]


async def _stopped_in(stack: Stack, name: str) -> tuple[float, int]:
    """SIGTERMs the worker; seconds until it exited, and its exit code."""
    proc = stack.procs.pop(name)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(proc.wait, 20)
    return time.monotonic() - started, code


async def _worker_with_one_task(
    settings: Settings, ctx: Context, sink: Destination, tmp_path: Path
) -> tuple[Stack, str]:
    """One due task for the sink, then a deliver worker with a 5 s poll (its first step claims the task)."""
    made = await limited_tasks(ctx, sink.url, 1)
    stack = Stack(settings, tmp_path, HOOKYARD_DELIVER_POLL_S=str(POLL_S))
    stack.start_worker("worker", "deliver")
    return stack, made["destination"]


async def test_an_idle_deliver_worker_stops_at_sigterm_not_at_its_poll(
    settings: Settings, ctx: Context, tmp_path: Path
) -> None:
    with serving() as sink:
        stack, destination_id = await _worker_with_one_task(settings, ctx, sink, tmp_path)
        try:

            async def recorded() -> bool:
                return await _attempts(ctx, destination_id) == [(1, 200)]

            await wait_for(recorded, timeout=20, interval=0.05)
            await asyncio.sleep(0.2)  # the loop is back in its wait for a wakeup (up to the 5 s poll)
            took, code = await _stopped_in(stack, "worker")
        finally:
            stack.stop_all()
    assert code == 0, (tmp_path / "worker.log").read_text()
    assert took < 1.5, f"an idle worker took {took:.2f}s to stop at SIGTERM (its poll: {POLL_S:g}s)"


async def test_a_send_in_flight_at_sigterm_finishes_is_recorded_once_and_the_worker_exits(
    settings: Settings, ctx: Context, tmp_path: Path
) -> None:
    with serving() as sink:
        sink.reply(default=Reply(delay_s=SLOW_S))
        stack, destination_id = await _worker_with_one_task(settings, ctx, sink, tmp_path)
        try:
            await sink.wait_for(1, timeout=20)  # in flight: answered SLOW_S after it arrived
            took, code = await _stopped_in(stack, "worker")
        finally:
            stack.stop_all()
        assert len(sink.requests) == 1
    assert code == 0, (tmp_path / "worker.log").read_text()
    assert await _attempts(ctx, destination_id) == [(1, 200)]  # its answer recorded, once, before the exit
    task = await fetch_row(ctx, "SELECT status, attempts FROM delivery_tasks WHERE destination_id = $1", destination_id)
    assert (task["status"], task["attempts"]) == ("succeeded", 1)
    assert took < SLOW_S + 1.0, f"the worker took {took:.2f}s to stop after its send ({SLOW_S:g}s)"
