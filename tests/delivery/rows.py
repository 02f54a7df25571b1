"""The ``deliveries`` row of one attempt of a task ``make_task`` made, as the recorder writes it."""

from __future__ import annotations

from typing import Any

from control.delivery.send import Outcome, delivery_row

__all__ = ("attempt_row",)


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
