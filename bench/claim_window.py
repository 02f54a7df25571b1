"""What a claim costs per task taken, in Postgres and in the worker, with the pipeline's shape: a harness.

``bench pipeline`` claims with about 155 free slots, a window of 384 candidates (twice the free slots,
rounded up by ``tasks.window_for``) and room for about 85 tasks of its one destination (logged per claim over
a 5 s run: 275 claims locked 366 candidates and took 85 on average). This replays that shape with the real
claim (``control.db.tasks.claim_ready``, its rows made into ``LeasedTask``) on a backlog of ``CLAIM_EVENTS``
tasks of one destination stored by the flush's statement, ``CLAIM_FREE`` / ``CLAIM_ROOM`` at a time, and
records each claim's tasks as succeeded with the recorder's statement (so what a claim leaves behind is paid
where it is paid). Printed per claimed task: the backend's CPU for the claims and for the records
(``/proc/<pid>/schedstat``), this process's CPU for the claims (the statement's rows decoded and made into
tasks) and the WAL bytes the claims wrote. A first round is not printed (the plans turn generic after five
calls).

Old against new: the file runs with either checkout's code, so run it from each, alternated, under the bench
lock: ``cd DIR && PYTHONPATH=. flock /work/bench.lock .venv/bin/python -c "import runpy;
runpy.run_path('/path/to/this/tree/bench/claim_window.py', run_name='__main__')"`` (``run_path`` puts no folder
of this tree on ``sys.path``: the code is DIR's).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from bench.delivery import bench_records, route_to_sink
from bench.first_attempt import _cpu_ns, _row
from bench.infra import bench_env
from bench.setup import create_endpoint
from control.db import connect
from control.db import delivery_records as records
from control.db import tasks as db_tasks
from control.db.flush import store_batch
from control.records.storable import event_row
from shared import ids
from shared.settings import Settings

EVENTS = int(os.environ.get("CLAIM_EVENTS", "6800"))
ROUNDS = int(os.environ.get("CLAIM_ROUNDS", "3"))
FREE = int(os.environ.get("CLAIM_FREE", "155"))
ROOM = int(os.environ.get("CLAIM_ROOM", "85"))
FLUSH_BATCH = 400
_LSN = "SELECT pg_current_wal_insert_lsn()::text"


async def _round(conn: Any, backend: int, endpoint: str, dst: str, rule: str) -> dict[str, float]:
    recs = bench_records(endpoint, EVENTS)
    for i in range(0, len(recs), FLUSH_BATCH):
        part = recs[i : i + FLUSH_BATCH]
        async with conn.transaction():
            await store_batch(conn, [event_row(x) for x in part], [(ids.new_id("task"), x.id, rule, dst) for x in part])
    ask = db_tasks.Claim(free=FREE, window=2 * FREE, blocked=(), room={dst: ROOM}, per_destination=32, lease_s=60)
    spent = {"claim_pg": 0, "record_pg": 0, "claim_client": 0, "claim_wal_bytes": 0}
    done = 0
    while True:
        lsn = await conn.fetchval(_LSN)
        pg, client = _cpu_ns(backend), time.process_time_ns()
        claimed, *_ = await db_tasks.claim_ready(conn, ask)
        spent["claim_client"] += time.process_time_ns() - client
        spent["claim_pg"] += _cpu_ns(backend) - pg
        spent["claim_wal_bytes"] += 1000 * int(await conn.fetchval(f"SELECT pg_current_wal_insert_lsn() - '{lsn}'"))
        if not claimed:
            break
        pg = _cpu_ns(backend)
        rows = [_row(t.event_id, endpoint, t.id, dst, rule, ids.new_id("dlv")) for t in claimed]
        results = [(t.id, t.attempts, "succeeded", None, None) for t in claimed]
        done += await records.write(conn, rows, results, [dst])
        spent["record_pg"] += _cpu_ns(backend) - pg
    assert done == EVENTS, done
    return {k: round(v / 1000 / done, 1) for k, v in spent.items()}


async def _run(settings: Settings) -> None:
    endpoint = (await create_endpoint(settings)).id
    dst, rule = await route_to_sink(settings.database_url or "", endpoint, "http://127.0.0.1:9/hook")
    conn = await connect(settings.database_url or "")
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    print(f"{os.getcwd()}: {EVENTS} tasks a round, free {FREE}, room {ROOM}, load {os.getloadavg()[0]:.1f}")
    await _round(conn, backend, endpoint, dst, rule)
    for rnd in range(ROUNDS):
        print(f"round {rnd}: per claimed task µs {await _round(conn, backend, endpoint, dst, rule)}", flush=True)
    await conn.close()


if __name__ == "__main__":
    with bench_env() as bench:
        asyncio.run(_run(bench.settings))
