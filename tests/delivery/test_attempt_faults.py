"""An attempt that raises for a reason of its own (not a store away) fails alone and is bounded by the schedule.

The trigger is real, not a patched function: a destination whose signing secret was sealed under an
encryption key that is no longer configured (``HOOKYARD_ENCRYPTION_KEYS`` rotated without re-sealing). Opening
it raises ``ConfigError`` inside the attempt, before anything is sent. Before, that exception ended the
attempt with nothing recorded, and the task came back with every lease expiry (a minute apart) until the
sweep failed it, with no record of why. Now each attempt is recorded with the error, counted, and retried on
the schedule, and the other destinations' deliveries go on meanwhile.
"""

from __future__ import annotations

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
    assert "ConfigError" in failed["last_error"]
    assert "'gone', which is not configured" in failed["last_error"]
    assert [r.body for r in destination.requests] == [b'{"n":"healthy"}']  # the broken one never went out
    records = await deliveries_of(ctx, broken["event"])
    assert [(r["attempt_number"], r["success"], r["response_status"]) for r in records] == [
        (n, False, None) for n in range(1, attempts + 1)
    ]
    assert all(r["error"].startswith("attempt failed inside hookyard") for r in records)
    # Not the destination's fault: its circuit counted none of them.
    circuit = await fetch_row(
        ctx, "SELECT circuit, consecutive_failures FROM destinations WHERE id = $1", broken["destination"]
    )
    assert (circuit["circuit"], circuit["consecutive_failures"]) == ("closed", 0)
