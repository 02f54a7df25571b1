"""The activity line (``hookyard up``) of a delivery its transform kept from being sent says what happened and
after how long: a fresh-clone trial read "failed: transform failed: stopped: ... in 0 ms" after a 1 s stop (and
the same after a 20 s wait for a sandbox turn), the 0 ms being the latency of a send that never happened. A
real deliver worker and sandbox pool, a loopback destination written through /v1 (which receives nothing)."""

from __future__ import annotations

import logging
import re

import msgspec
import pytest

from control.db.context import Context
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, make_task, running, serving, settled
from tests.transform.delivering import add_destination

RUNAWAY = "function handler(r) { for (;;) {} }"
SKIPS = "function handler(r) { return null; }"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY, log_activity=True)


async def _line(ctx: Context, client, account, caplog: pytest.LogCaptureFixture, transform: str, status: str) -> str:
    """The activity line of the one attempt of a delivery through ``transform``, once its task is ``status``."""
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    with serving() as sink:
        endpoint, dst, _ = await add_destination(client, account, sink.url, transform)
        made = await make_task(ctx, sink.url, endpoint_id=endpoint, destination_id=dst)
        async with running(ctx):
            await settled(ctx, made["task"], status, timeout=20)
        assert sink.requests == []
    [line] = [
        r.getMessage() for r in caplog.records if r.name == "hookyard.activity" and made["event"] in r.getMessage()
    ]
    return line


async def test_a_stopped_transform_says_not_sent_and_how_long_it_ran(
    ctx: Context, client, account, caplog: pytest.LogCaptureFixture
) -> None:
    line = await _line(ctx, client, account, caplog, RUNAWAY, "failed")
    stopped = r"  not sent: transform stopped after \d+\.\d s \(still running after 1 s\)"
    assert re.search(stopped + r" \(attempt 1, gave up\)$", line), line
    assert " ms" not in line, line


async def test_a_skipping_transform_says_not_sent(
    ctx: Context, client, account, caplog: pytest.LogCaptureFixture
) -> None:
    line = await _line(ctx, client, account, caplog, SKIPS, "succeeded")
    assert re.search(r"  not sent: transform skipped it after \d+ ms \(attempt 1\)$", line), line
    assert "failed" not in line, line
