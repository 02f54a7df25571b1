"""The recorder gathers results that arrive soon after a write began into the next batch (``GATHER_S``), and
writes at once what must not wait (a lone result, one the destination's other tasks or a FIFO line wait for):
a worker whose results arrive spread out, a transformed delivery's, wrote three times as many batches per
delivery as a plain one (issue 42, ADR 0060)."""

from __future__ import annotations

import asyncio
import time

import pytest

from control.db.context import Context
from control.delivery import recorder as recorder_module
from control.delivery.recorder import Recorder
from tests.delivery.rows import finished_attempt
from tests.destination import Destination
from tests.helpers import wait_for


async def test_results_soon_after_a_write_go_together_and_urgent_ones_at_once(
    ctx: Context, destination: Destination, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "GATHER_S", 1.0)  # long, so that a loaded machine cannot blur it
    batches: list[float] = []
    recorder = Recorder(ctx, on_written=lambda failures, released: batches.append(time.monotonic()))
    lone, later, latest, urgent = [await finished_attempt(ctx, destination) for _ in range(3)] + [
        await finished_attempt(ctx, destination, success=False)
    ]
    began = time.monotonic()
    recorder.add(lone)  # the writer was idle: written at once
    await wait_for(lambda: asyncio.sleep(0, len(batches) == 1), timeout=5)
    assert batches[0] - began < 0.5
    recorder.add(later)  # soon after a write began: gathered...
    await asyncio.sleep(0.05)
    recorder.add(latest)  # ...with this one
    await asyncio.sleep(0.05)
    assert len(batches) == 1
    assert recorder.queued == 2
    await wait_for(lambda: asyncio.sleep(0, len(batches) == 2), timeout=5)
    assert batches[1] - batches[0] >= 0.5  # the gathering lasted (about) GATHER_S from the first write
    assert recorder.queued == 0
    recorder.add(urgent)  # a failure the circuit counts: its destination's tasks wait for it, so at once
    await wait_for(lambda: asyncio.sleep(0, len(batches) == 3), timeout=5)
    assert batches[2] - batches[1] < 0.5
    await recorder.drain(timeout_s=5)
    async with ctx.pool.acquire() as conn:
        statuses = await conn.fetch(
            "SELECT status FROM delivery_tasks WHERE id = ANY($1::text[])",
            [a.task_id for a in (lone, later, latest, urgent)],
        )
    assert sorted(r["status"] for r in statuses) == ["pending", "succeeded", "succeeded", "succeeded"]


async def test_a_full_batch_does_not_wait(
    ctx: Context, destination: Destination, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "GATHER_S", 5.0)
    monkeypatch.setattr(recorder_module, "GATHER_ROWS", 3)
    batches: list[float] = []
    recorder = Recorder(ctx, on_written=lambda failures, released: batches.append(time.monotonic()))
    attempts = [await finished_attempt(ctx, destination) for _ in range(4)]
    recorder.add(attempts[0])
    await wait_for(lambda: asyncio.sleep(0, len(batches) == 1), timeout=5)
    began = time.monotonic()
    for attempt in attempts[1:]:
        recorder.add(attempt)
    await wait_for(lambda: asyncio.sleep(0, len(batches) == 2), timeout=5)
    assert batches[1] - began < 2.5
