"""The deliver worker under faults: one attempt result the database refuses is isolated (the others are
written, its task is finished, nothing is sent again), and a Postgres outage longer than the lease is
waited out by two workers with every event delivered and recorded, the extra sends counted."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import msgspec
import pytest

from control.db.context import Context
from control.db.delivery_records import COLUMNS
from control.db.leased import LeasedTask
from control.delivery.claim import claim
from control.delivery.recorder import Attempt, Recorder
from control.delivery.send import Outcome, delivery_row
from control.workers.main import worker_context
from shared.settings import Settings
from tests.conftest import Servers
from tests.destination import (
    Destination,
    deliveries_of,
    make_task,
    running,
    settled,
    task_status,
)
from tests.helpers import blocked_by, db, refusing_connections, wait_for

_COLUMNS = (
    "id, task_id, destination_name, destination_url, source, request_headers, request_body, response_body, "
    "success, error"
)


async def _tasks(ctx: Context, url: str, count: int) -> list[dict[str, str]]:
    first = await make_task(ctx, url)
    rest = [
        await make_task(ctx, url, endpoint_id=first["endpoint"], destination_id=first["destination"])
        for _ in range(count - 1)
    ]
    return [first, *rest]


def _attempt(task: LeasedTask, **row_changes: Any) -> Attempt:
    """A successful attempt of a leased task, as the deliver worker hands it to the Recorder; its row
    with ``row_changes`` applied (set on purpose past the rule that makes rows storable)."""
    outcome = Outcome(
        status=200,
        latency_ms=7,
        sent_headers={"content-type": "text/plain", "x-hookyard-event-id": task.event_id},
        response_body=b"ok",
    )
    row = list(
        delivery_row(
            outcome,
            b"payload",
            endpoint_id=task.endpoint_id,
            event_id=task.event_id,
            task_id=task.id,
            destination_id=task.destination_id,
            destination_name=task.destination_name,
            destination_url=task.destination_url,
            rule_id=task.rule_id,
            source="rule",
            attempt=task.attempts,
        )
    )
    for name, value in row_changes.items():
        row[COLUMNS.index(name)] = value
    return Attempt(
        task_id=task.id,
        attempts=task.attempts,
        status="succeeded",
        retry_in_s=None,
        last_error=None,
        destination_id=task.destination_id,
        success=True,
        delivery=tuple(row),
    )


@pytest.mark.parametrize(
    ("bad", "kept"),
    [
        # NUL in a text column (Postgres refuses it): the row is stored without its free-form parts.
        ({"row": {"destination_name": "sink\x00"}}, "reduced"),
        # A lone surrogate in jsonb (asyncpg cannot even encode it): the same.
        ({"row": {"request_headers": {"x-bad": "\ud800"}}}, "reduced"),
        # A CHECK violation in a column the reduced row keeps: the task result is written without the row.
        ({"row": {"source": "carrier-pigeon"}}, "none"),
        # The task result itself refused (NUL in last_error): the row is kept (reduced), the error replaced.
        ({"last_error": "refused\x00", "status": "pending", "retry_in_s": 60.0, "success": False}, "placeholder"),
    ],
    ids=["nul-in-text", "surrogate-in-jsonb", "check-violation", "bad-task-result"],
)
async def test_one_unstorable_attempt_is_isolated_and_its_task_finished(
    ctx: Context, destination: Destination, caplog: pytest.LogCaptureFixture, bad: dict[str, Any], kept: str
) -> None:
    await _tasks(ctx, destination.url, 12)
    async with ctx.pool.acquire() as conn:
        leased, _ = await claim(
            conn, free=12, in_flight={}, per_destination=12, blocked=[], lease_s=60.0, cooldown_s=30.0
        )
    assert len(leased) == 12
    attempts = [_attempt(task) for task in leased]
    victim = leased[5]
    changes = dict(bad)
    attempts[5] = _attempt(victim, **changes.pop("row", {}))
    for name, value in changes.items():
        setattr(attempts[5], name, value)

    recorder = Recorder(ctx)
    with caplog.at_level(logging.ERROR, logger="hookyard.worker.deliver"):
        for attempt in attempts:  # all queued before the writer runs: one group commit
            recorder.add(attempt)
        assert recorder.queued == 12
        await recorder.drain(timeout_s=20)
    assert recorder.queued == 0
    assert not recorder.stalled

    for task in leased:  # every task finished: nothing is left in flight to be sent again after its lease
        row = await task_status(ctx, task.id)
        expected = "pending" if task is victim and kept == "placeholder" else "succeeded"
        assert (row["status"], row["attempts"]) == (expected, 1), task.id
    async with ctx.pool.acquire() as conn:
        rows = {r["task_id"]: r for r in await conn.fetch(f"SELECT {_COLUMNS} FROM deliveries")}
    others = [t for t in leased if t is not victim]
    assert {t.id for t in others} <= set(rows)
    for task in others:  # written normally, in full
        row = rows[task.id]
        assert (row["request_body"], row["response_body"], row["success"]) == (b"payload", b"ok", True)
        assert row["destination_url"] == destination.url
        assert row["error"] is None
    if kept == "none":
        assert victim.id not in rows
    else:
        row = rows[victim.id]
        assert row["source"] == "rule"
        assert (row["request_headers"], row["request_body"], row["destination_name"]) == (None, None, None)
        assert row["error"].startswith("delivery record reduced: the full record could not be stored (")
        assert "\x00" not in row["error"]
    if kept == "placeholder":
        last_error = (await task_status(ctx, victim.id))["last_error"]
        assert last_error.startswith("attempt finished, but its result could not be stored")
    (logged,) = [r.getMessage() for r in caplog.records if victim.id in r.getMessage()]
    assert "result written" in logged
    assert destination.requests == []  # nothing was sent: the tasks were leased by hand


async def test_a_postgres_outage_longer_than_the_lease_is_waited_out(
    settings: Settings, servers: Servers, database_url: str, destination: Destination
) -> None:
    """Two workers each hold answered attempts they cannot record while the database refuses connections
    for longer than the lease; the rest of the tasks wait. Afterwards every event is delivered and
    recorded, and no held task is sent again: each worker keeps its own out of its sweep, neither sweeps
    while its Recorder cannot write, and neither sweeps another's within the grace after the outage."""
    tuned = msgspec.structs.replace(
        settings, deliver_lease_s=2.0, deliver_timeout_s=1.0, deliver_per_destination=4, deliver_concurrency=8
    )
    async with worker_context(tuned) as ctx, worker_context(tuned) as other_ctx:
        tasks = await _tasks(ctx, destination.url, 16)
        destination.hold()  # requests arrive and wait for their answer
        try:
            async with running(ctx) as first, running(other_ctx) as second:
                await destination.wait_for(8)  # four in flight at each worker (its per-destination cap)
                leased_by = time.monotonic()
                async with refusing_connections(servers, database_url):
                    destination.release()  # the eight answers come back while nothing can be recorded

                    async def outlasted() -> bool:
                        # Both Recorders hold their results and the leases of those tasks have run out.
                        held = first.recorder.stalled and second.recorder.stalled
                        return held and time.monotonic() > leased_by + tuned.deliver_lease_s + 1.0

                    await wait_for(outlasted, timeout=30)
                    assert first.recorder.queued == second.recorder.queued == 4
                    assert len(destination.requests) == 8  # nothing new claimed during the outage
                for task in tasks:
                    await settled(ctx, task["task"], "succeeded", timeout=30)
        finally:
            destination.release()
        sent = Counter(r.headers["x-hookyard-event-id"] for r in destination.requests)
        assert set(sent) == {t["event"] for t in tasks}  # every event delivered
        extras = sum(n - 1 for n in sent.values())
        assert extras == 0, f"{extras} extra sends: {sent}"
        for task in tasks:  # and every attempt recorded, once
            rows = await deliveries_of(ctx, task["event"])
            assert [(r["attempt_number"], r["success"]) for r in rows] == [(1, True)], task


async def test_a_result_whose_write_waits_past_the_lease_is_not_swept_and_sent_again(
    settings: Settings, database_url: str, destination: Destination
) -> None:
    """The worker's own sweep leaves alone a task whose result it is writing, however long the write waits
    (here for a lock on ``deliveries``, which the sweep does not touch): it used to hand it back, once the
    lease ran out, to be claimed and sent a second time (issue 44)."""
    tuned = msgspec.structs.replace(settings, deliver_lease_s=2.0, deliver_timeout_s=1.0, deliver_sweep_s=0.2)
    async with worker_context(tuned) as ctx:
        (task,) = await _tasks(ctx, destination.url, 1)
        async with db(database_url) as holder, db(database_url) as observer:
            await holder.execute("BEGIN; LOCK TABLE deliveries IN SHARE MODE")  # no result can be written
            async with running(ctx) as worker:
                try:
                    await destination.wait_for(1)
                    await blocked_by(observer, holder)  # its result's write waits for the lock
                    expired_at = time.monotonic() + tuned.deliver_lease_s
                    sweeps: set[float] = set()

                    async def swept_since_expiry() -> bool:
                        # A sweep began after the lease ran out, and then another: the first one is over.
                        if (next_sweep := worker._next_sweep) > expired_at + tuned.deliver_sweep_s:
                            sweeps.add(next_sweep)
                        return len(sweeps) >= 2

                    await wait_for(swept_since_expiry, timeout=30)
                    assert worker.recorder.queued == 1
                finally:
                    await holder.execute("ROLLBACK")
                await settled(ctx, task["task"], "succeeded", timeout=30)
        assert len(destination.requests) == 1
        rows = await deliveries_of(ctx, task["event"])
        assert [(r["attempt_number"], r["success"]) for r in rows] == [(1, True)]
