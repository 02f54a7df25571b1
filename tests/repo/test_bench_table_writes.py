"""``bench.table_writes`` counts what the delivery tables were written per event: the figure issue 48's changes are
judged by beside the CPU (ADR 0064: count first)."""

from __future__ import annotations

from bench.table_writes import per_event, snapshot
from control.db import connect
from tests.destination import add_destination, add_endpoint, add_rule
from tests.events_support import Ev, store, store_task
from tests.helpers import wait_for


async def test_a_runs_inserts_updates_and_deletes_are_counted_per_event(database_url: str) -> None:
    before = await snapshot(database_url)
    conn = await connect(database_url)  # one backend, which reports its counts when it ends
    try:
        endpoint_id = await add_endpoint(conn)
        destination_id = await add_destination(conn, endpoint_id, "http://127.0.0.1:9/")
        rule_id = await add_rule(conn, endpoint_id, [destination_id])
        events = [Ev(endpoint_id=endpoint_id) for _ in range(4)]
        await store(conn, None, None, events)
        made = [
            await store_task(
                conn,
                endpoint_id=endpoint_id,
                event_id=e.id,
                received_at=e.received_at,
                rule_id=rule_id,
                destination_id=destination_id,
            )
            for e in events
        ]
        await conn.execute("UPDATE delivery_tasks SET status = 'in_flight', attempts = 1")
        await conn.execute("DELETE FROM delivery_tasks WHERE id = $1", made[0])
    finally:
        await conn.close()

    async def counted() -> dict[str, float] | None:
        found = per_event(before, await snapshot(database_url), 4)
        return found if found.get("tasks_del") and found.get("tasks_upd") and found.get("tasks_ins") == 1 else None

    writes = await wait_for(counted)
    assert writes["events_ins"] == 1.0
    assert writes["tasks_upd"] == 1.0
    assert writes["tasks_del"] == 0.25
    assert "records_ins" not in writes  # nothing moved, nothing printed
    assert writes.get("tasks_hot", 0) <= writes["tasks_upd"]


def test_per_event_rounds_and_leaves_out_what_did_not_move() -> None:
    assert per_event({"tasks_ins": 10, "tasks_upd": 5}, {"tasks_ins": 40, "tasks_upd": 5, "records_ins": 7}, 3) == {
        "records_ins": 2.33,
        "tasks_ins": 10.0,
    }
