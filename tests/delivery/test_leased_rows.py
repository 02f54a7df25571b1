"""A claim's rows become leased tasks by position, checked by name (``control.db.leased``): every field is its
own column's value, the claim's meta row is left out, and rows whose columns are not the fields in order are
refused rather than read shifted."""

from __future__ import annotations

import msgspec
import pytest

from control.db import tasks as db_tasks
from control.db.leased import LEASED_COLUMNS, leased
from control.workers.main import worker_context
from shared.settings import Settings
from tests.destination import make_task
from tests.helpers import db

_SWAPPED = LEASED_COLUMNS.replace(
    "c.endpoint_id AS endpoint_id, c.event_id AS event_id", "c.event_id AS event_id, c.endpoint_id AS endpoint_id"
)


async def test_every_field_of_a_claimed_task_is_its_own_column(settings: Settings) -> None:
    """Three claimed tasks with labels, an idempotency key and destination headers: each task's fields equal the
    columns of the same name in the claim's rows, read by name; the meta row makes no task."""
    async with worker_context(settings) as ctx:
        first = await make_task(
            ctx, "http://127.0.0.1:9/hook", dest_headers={"x-team": "a"}, labels=[{"key": "k", "value": "v"}]
        )
        for n in range(2):
            await make_task(
                ctx,
                "http://127.0.0.1:9/hook",
                endpoint_id=first["endpoint"],
                destination_id=first["destination"],
                idempotency_key=f"idem-{n}",
                body=b"\x00\xff raw",
            )
    ask = db_tasks.Claim(free=8, window=8, blocked=(), room={}, per_destination=8, lease_s=60.0)
    async with db(settings.database_url or "") as conn, conn.transaction():
        rows = await conn.fetch(db_tasks._claim_ready(db_tasks.window_for(ask.window)), *ask.params())
    tasks = leased(rows)
    assert len(tasks) == 3
    by_id = {r["id"]: r for r in rows if r["id"] is not None}
    for task in tasks:
        row = by_id[task.id]
        assert msgspec.structs.asdict(task) == {name: row[name] for name in task.__struct_fields__}
    assert {t.destination_headers["x-team"] for t in tasks if t.destination_headers} == {"a"}
    assert {t.idempotency_key for t in tasks} == {None, "idem-0", "idem-1"}
    assert {bytes(t.body or b"") for t in tasks} >= {b"\x00\xff raw"}


async def test_rows_whose_columns_moved_are_refused_not_read_shifted(settings: Settings) -> None:
    """Two columns swapped in the SQL: an error naming the columns, not a task whose endpoint is its event."""
    async with worker_context(settings) as ctx:
        made = await make_task(ctx, "http://127.0.0.1:9/hook")
    async with db(settings.database_url or "") as conn:
        rows = await conn.fetch(
            f"""SELECT 3 AS meta, {_SWAPPED}
                  FROM delivery_tasks c JOIN destinations d ON d.id = c.destination_id
                  LEFT JOIN events e ON e.id = c.event_id AND e.received_at = c.event_received_at
                 WHERE c.id = $1""",
            made["task"],
        )
    assert rows
    with pytest.raises(ValueError, match="not the columns of a leased task"):
        leased(rows)
