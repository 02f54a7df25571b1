"""What ``up`` logs while a destination's circuit stays open: the opening once (a warning), each failed probe
only at debug. Before, every failed probe reopened the circuit with "circuit of dst_… opened after 10
consecutive failures" again, once per cool-down for as long as the outage lasted."""

from __future__ import annotations

import logging

import msgspec
import pytest

from control.workers.main import worker_context
from shared.settings import Settings
from tests.destination import Destination, Reply, make_task, running
from tests.helpers import wait_for


async def test_an_open_circuit_is_logged_once_and_its_failed_probes_at_debug(
    settings: Settings, destination: Destination, caplog: pytest.LogCaptureFixture
) -> None:
    tuned = msgspec.structs.replace(
        settings,
        circuit_failure_threshold=3,
        circuit_cooldown_s=0.2,
        deliver_per_destination=1,
        retry_schedule_s=(0.05,) * 9,  # every task is due again soon: there is always one to probe with
    )
    destination.reply(default=Reply(status=500))
    with caplog.at_level(logging.DEBUG, logger="hookyard.worker.deliver"):
        async with worker_context(tuned) as ctx:
            first = await make_task(ctx, destination.url)
            for _ in range(5):
                await make_task(
                    ctx, destination.url, endpoint_id=first["endpoint"], destination_id=first["destination"]
                )
            async with running(ctx) as deliver:

                async def probes_failed() -> bool:
                    idle = deliver.in_flight == 0 and deliver.recorder.queued == 0
                    return idle and len(_lines(caplog, first["destination"], "probe of")) >= 3

                await wait_for(probes_failed, timeout=20)
    opened = _lines(caplog, first["destination"], "opened after")
    assert [r.levelno for r in opened] == [logging.WARNING], [r.getMessage() for r in opened]
    probes = _lines(caplog, first["destination"], "probe of")
    assert {r.levelno for r in probes} == {logging.DEBUG}
    assert "failed; its circuit stays open, next probe in 0.2s" in probes[0].getMessage()
    assert len(destination.requests) >= 3 + 3  # the failures that opened it, then the failed probes


def _lines(caplog: pytest.LogCaptureFixture, destination_id: str, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if destination_id in r.getMessage() and text in r.getMessage()]
