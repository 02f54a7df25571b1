"""What the alert tests share: two alert workers on their own connections, and the signed-body check."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import standardwebhooks

from control.workers.alerts.loop import Alerts
from control.workers.loop import run_loops
from control.workers.main import worker_context
from shared.settings import Settings
from tests.destination import Received

__all__ = ("alert_workers", "verified")


@contextlib.asynccontextmanager
async def alert_workers(settings: Settings, count: int = 2, **options: Any) -> AsyncIterator[list[Alerts]]:
    """``count`` alert loops, each with its own pool and Redis client (as separate worker processes have),
    running until the block ends."""
    async with contextlib.AsyncExitStack() as stack:
        loops = []
        for _ in range(count):
            ctx = await stack.enter_async_context(worker_context(settings))
            loops.append(Alerts(ctx, **options))
        stop = asyncio.Event()
        task = asyncio.create_task(run_loops(loops, stop))
        try:
            yield loops
        finally:
            stop.set()
            await task
            for loop in loops:
                await loop.close()


def verified(request: Received, secret: str) -> dict[str, Any]:
    """The body, after the Standard Webhooks library accepted its signature (it raises otherwise)."""
    standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    return json.loads(request.body)
