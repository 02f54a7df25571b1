"""The activity line (``hookyard up``) of a failed attempt says what comes of it: "retry in Ns" was the only
ending, so a last attempt ("attempt 4") and a 410 that disables the destination read like any failure with
more to come. A fresh-clone trial asked "did it give up?". A real deliver worker and loopback destination."""

from __future__ import annotations

import logging
import re

import msgspec
import pytest

from control.workers.main import worker_context
from shared.settings import Settings
from tests.destination import Destination, Reply, make_task, running, settled


async def _line(settings: Settings, destination: Destination, caplog: pytest.LogCaptureFixture, status: str) -> str:
    """The activity line of the last attempt of one delivery, once its task is ``status``."""
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    async with worker_context(msgspec.structs.replace(settings, log_activity=True)) as ctx:
        made = await make_task(ctx, destination.url)
        async with running(ctx):
            await settled(ctx, made["task"], status)
    lines = [r.getMessage() for r in caplog.records if r.name == "hookyard.activity"]
    lines = [line for line in lines if made["event"] in line]
    assert lines, caplog.text
    return lines[-1]


async def test_the_last_failed_attempt_says_it_gave_up(
    settings: Settings, destination: Destination, caplog: pytest.LogCaptureFixture
) -> None:
    destination.reply(default=Reply(status=500))
    line = await _line(msgspec.structs.replace(settings, retry_schedule_s=(0.05,)), destination, caplog, "failed")
    assert re.search(r"  500 in \d+ ms \(attempt 2, gave up\)$", line), line


async def test_a_retried_attempt_still_says_when(
    settings: Settings, destination: Destination, caplog: pytest.LogCaptureFixture
) -> None:
    destination.reply(Reply(status=503), default=Reply(status=200))
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    await _line(msgspec.structs.replace(settings, retry_schedule_s=(0.05,)), destination, caplog, "succeeded")
    first = next(r.getMessage() for r in caplog.records if "(attempt 1" in r.getMessage())
    assert first.endswith(", retry in 0s)"), first
    assert "gave up" not in caplog.text


async def test_a_410_says_the_destination_is_held(
    settings: Settings, destination: Destination, caplog: pytest.LogCaptureFixture
) -> None:
    destination.reply(default=Reply(status=410))
    line = await _line(settings, destination, caplog, "held")
    assert line.endswith("(attempt 1, held: destination disabled)"), line
