"""A worker started before Redis answers waits for it and then works, as it waits out any later outage: it
used to exit at its first connection, and a topology whose Redis restarted while its workers were still
starting was left with nothing flushing what the edge had acknowledged."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec

from bench.ports import free_port
from control.db.context import Context
from shared.settings import Settings
from tests.conftest import ingest_record
from tests.helpers import wait_for
from tests.redis_relay import RedisRelay
from tests.stack import Stack
from tests.workers.conftest import endpoint_row, event_count, xadd


async def test_a_flush_started_before_redis_answers_flushes_once_it_does(
    settings: Settings, ctx: Context, tmp_path: Path
) -> None:
    endpoint_id = await endpoint_row(ctx)
    records = [ingest_record(endpoint_id) for _ in range(3)]
    await xadd(ctx, records)
    port = free_port()  # nothing listens there yet
    later = RedisRelay(settings.redis_url or "")
    parts = urlsplit(settings.redis_url or "")
    url = urlunsplit(parts._replace(netloc=f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{port}".lstrip("@")))
    stack = Stack(msgspec.structs.replace(settings, redis_url=url), tmp_path)
    log = tmp_path / "flush.log"
    try:
        stack.start_worker("flush", "flush")

        async def asked_twice() -> bool:
            return log.exists() and log.read_text().count("Redis unreachable") >= 2

        await wait_for(asked_twice, timeout=30, interval=0.05)
        assert stack.procs["flush"].poll() is None, log.read_text()  # still running, waiting
        assert await later.start(port) == url  # Redis answers where the worker was told to look

        async def stored() -> bool:
            return await event_count(ctx, endpoint_id) == (3, 3)

        await wait_for(stored, timeout=30, interval=0.1)
    finally:
        # Off this loop: the relay the worker reaches Redis through runs on it, and the worker's orderly stop
        # needs Redis. Stopped from the loop itself (a blocking wait), the relay stood still, the worker could
        # not finish its stop, and the test idled stop_all's 10 s SIGTERM wait to SIGKILL it.
        await asyncio.to_thread(stack.stop_all)
        await later.cut()
