"""The ``deliveries`` row of one attempt of a task ``make_task`` made, as the recorder writes it, and the
finished attempt the deliver worker hands the recorder for a new such task."""

from __future__ import annotations

from typing import Any

from control.db.context import Context
from control.delivery.recorder import Attempt
from control.delivery.send import Outcome, delivery_row
from tests.destination import Destination, make_task

__all__ = ("attempt_row", "finished_attempt")


def attempt_row(made: dict[str, str], latency_ms: int | None, *, success: bool = True, transform: Any = None) -> tuple:
    """A first attempt to the ``sink`` destination: 200 (500 when not ``success``), ``latency_ms`` (None: 0)."""
    return delivery_row(
        Outcome(status=200 if success else 500, latency_ms=latency_ms or 0, sent_headers={"x-a": "1"}),
        b'{"ok": true}',
        endpoint_id=made["endpoint"],
        event_id=made["event"],
        task_id=made["task"],
        destination_id=made["destination"],
        destination_name="sink",
        destination_url="http://127.0.0.1:9/",
        rule_id=made["rule"],
        source="rule",
        attempt=1,
        transform=transform,
    )


async def finished_attempt(
    ctx: Context, destination: Destination, *, success: bool = True, ordered: bool = False
) -> Attempt:
    """A new task to ``destination`` and its first attempt, finished (a 500 to retry when not ``success``)."""
    made = await make_task(ctx, destination.url)
    return Attempt(
        task_id=made["task"],
        attempts=0,
        status="succeeded" if success else "pending",
        retry_in_s=None if success else 30.0,
        last_error=None if success else "HTTP 500",
        destination_id=made["destination"],
        success=success,
        delivery=attempt_row(made, 1, success=success),
        ordered=ordered,
    )
