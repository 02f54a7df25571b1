"""An attempt that raises for a reason of its own (not a store away) fails alone and is bounded by the schedule.

The trigger is real, not a patched function: a destination whose signing secret was sealed under an
encryption key that is no longer configured (``HOOKYARD_ENCRYPTION_KEYS`` rotated without re-sealing). Opening
it raises ``ConfigError`` inside the attempt, before anything is sent. Before, that exception ended the
attempt with nothing recorded, and the task came back with every lease expiry (a minute apart) until the
sweep failed it, with no record of why. Now each attempt is recorded with the error, counted, and retried on
the schedule, and the other destinations' deliveries go on meanwhile.
"""

from __future__ import annotations

import logging

import pytest

from control.db.context import Context
from control.db.keyring import PREFIX
from tests.destination import Destination, deliveries_of, fetch_row, make_task, running, settled


async def test_an_attempt_that_raises_fails_alone_and_runs_out_of_attempts(
    ctx: Context, destination: Destination
) -> None:
    broken = await make_task(ctx, destination.url, body=b'{"n":"broken"}')
    healthy = await make_task(ctx, destination.url, body=b'{"n":"healthy"}')
    async with ctx.pool.acquire() as conn:  # sealed under a key id this deployment does not have
        await conn.execute(
            "UPDATE destinations SET signing_secret = $2 WHERE id = $1", broken["destination"], f"{PREFIX}gone:AAAA"
        )
    async with running(ctx):
        await settled(ctx, healthy["task"], "succeeded")
        failed = await settled(ctx, broken["task"], "failed")
    attempts = len(ctx.settings.retry_schedule_s) + 1
    assert failed["attempts"] == attempts
    assert failed["last_error"].endswith(f"(attempt {attempts} of {attempts}, no attempts left)")
    # The tenant reads what happened, not the operator's setting, column and key id (the log has those).
    assert "cannot be opened by this worker (the operator's encryption keys)" in failed["last_error"]
    for operators in ("ConfigError", "HOOKYARD_ENCRYPTION_KEYS", "'gone'", "signing_secret"):
        assert operators not in failed["last_error"], operators
    assert [r.body for r in destination.requests] == [b'{"n":"healthy"}']  # the broken one never went out
    records = await deliveries_of(ctx, broken["event"])
    assert [(r["attempt_number"], r["success"], r["response_status"]) for r in records] == [
        (n, False, None) for n in range(1, attempts + 1)
    ]
    assert all(r["error"].startswith("attempt failed inside hookyard") for r in records)
    assert not any("HOOKYARD_ENCRYPTION_KEYS" in r["error"] for r in records)
    # Not the destination's fault: its circuit counted none of them.
    circuit = await fetch_row(
        ctx, "SELECT circuit, consecutive_failures FROM destinations WHERE id = $1", broken["destination"]
    )
    assert (circuit["circuit"], circuit["consecutive_failures"]) == ("closed", 0)


async def test_a_secret_under_a_key_this_worker_lacks_is_one_line_per_destination(
    ctx: Context, destination: Destination, caplog: pytest.LogCaptureFixture
) -> None:
    """The operator's trial: rotated to k2 while the workers ran with k1 only. Every attempt logged a traceback;
    now each destination says once, in one line without traceback, which key is missing and what to do."""
    first = await make_task(ctx, destination.url, body=b'{"n":1}')
    again = await make_task(  # a second task of the same destination: its line is said once
        ctx, destination.url, endpoint_id=first["endpoint"], destination_id=first["destination"], body=b'{"n":1}'
    )
    second = await make_task(ctx, destination.url, body=b'{"n":2}')
    tasks = [first, again]
    async with ctx.pool.acquire() as conn:
        for row in (first, second):
            await conn.execute(
                "UPDATE destinations SET signing_secret = $2 WHERE id = $1", row["destination"], f"{PREFIX}k2:AAAA"
            )
    with caplog.at_level(logging.DEBUG, logger="hookyard"):
        async with running(ctx):
            for row in (tasks[0], tasks[1], second):
                await settled(ctx, row["task"], "failed")
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert all(r.exc_info is None and "which is not configured" in r.getMessage() for r in said)
    assert sorted(r.getMessage().split()[1].rstrip(":") for r in said) == sorted(
        [tasks[0]["destination"], second["destination"]]
    )
    assert all("'k2'" in r.getMessage() and "restart" in r.getMessage() for r in said)
