"""What a first attempt's bookkeeping costs today against the stream design of ADR 0069: a harness.

Issue 48's target is a cost ratio of 2.5 where the pipeline measures 4.5-5; ADR 0064 names the design that
removes the most (a plain destination's first attempt held in a Redis stream, Postgres written once per
attempt). Before building it, this measures what it can save at best: the bookkeeping of one delivered event,
without the send, on both paths, with the real statements where they exist.

- **today**: the flush's statement storing events and their tasks (``control.db.flush.store_batch``) and the
  XACK/XDEL of the ingest entries; the claim (``control.db.tasks.claim_ready``, 80 a call, as the pipeline's
  ~81); the recorder's one statement (``control.db.delivery_records.write``: records, counts, task results,
  circuits; 80 a batch).
- **stream**: the flush's statement with no tasks; one Lua script per batch acknowledging the ingest entries
  and adding their first attempts to the shard's first-attempt stream (one entry per ingest entry: its
  attempts as one msgpack array); XREADGROUP of those entries and decoding them; the record insert locking
  its event (the statement the design needs: records and counts and circuits, no task), then XACK/XDEL.

Each round is a fresh batch of events of one endpoint with one forward-all destination; the two paths
alternate. Printed per delivered event: the Postgres backend's CPU, this process's CPU (the worker's side of
the same calls) and Redis' CPU, each read from ``/proc/<pid>/schedstat`` (nanoseconds) around the calls, so
the machine's other load moves the figures less than wall time would.

Run it under the bench lock: ``flock /work/bench.lock python -m bench.first_attempt``
(``FIRST_ATTEMPT_EVENTS``, ``FIRST_ATTEMPT_ROUNDS``, ``FIRST_ATTEMPT_PER_ENTRY``: records per ingest entry).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec
import redis.asyncio as aioredis

from bench.delivery import bench_records, route_to_sink
from bench.infra import bench_env
from bench.setup import create_endpoint
from control.db import circuit as db_circuit
from control.db import connect, stats
from control.db import delivery_records as records
from control.db import tasks as db_tasks
from control.db.flush import store_batch
from control.records.storable import event_row
from shared import ids
from shared.settings import Settings

T = TypeVar("T")

EVENTS = int(os.environ.get("FIRST_ATTEMPT_EVENTS", "4000"))
ROUNDS = int(os.environ.get("FIRST_ATTEMPT_ROUNDS", "3"))
PER_ENTRY = int(os.environ.get("FIRST_ATTEMPT_PER_ENTRY", "4"))
FLUSH_BATCH = 400
"""Events per flush statement: the fourth sitting of ADR 0064 measured 418 a batch."""
BATCH = 80
"""Tasks per claim and records per recorder statement (the pipeline's 81 and 83)."""

_HANDOFF = """
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
    redis.call('XDEL', KEYS[1], ARGV[i])
    if ARGV[i + 1] ~= '' then redis.call('XADD', KEYS[2], '*', 'a', ARGV[i + 1]); n = n + 1 end
  end
end
return n
"""
"""The flush's hand-off (ADR 0069): each ingest entry's first attempts are added only where its XACK returned
1, so of two flushes that stored the same entry exactly one adds them."""

_RECORD_ONLY = f"""
WITH ins AS (
    INSERT INTO deliveries ({", ".join(records.COLUMNS)})
    SELECT {", ".join("u." + c for c in records.COLUMNS)}
      FROM unnest($1::delivery_record[]) WITH ORDINALITY AS u
      JOIN unnest($2::timestamptz[]) WITH ORDINALITY AS r(received_at, n) ON r.n = u.ordinality
     WHERE EXISTS (SELECT 1 FROM events e WHERE e.id = u.event_id AND e.received_at = r.received_at FOR KEY SHARE)
    ON CONFLICT (id) DO NOTHING
    RETURNING id, endpoint_id, destination_id, created_at, success, latency_ms, source, transform
), rule_attempts AS (
    SELECT endpoint_id, destination_id, created_at, success, latency_ms FROM ins WHERE source = 'rule'
), counted AS ({stats.deliveries_counted("rule_attempts")}),
closed AS ({db_circuit.close_statement(3)} AND (SELECT count(*) FROM counted) >= 0 RETURNING 1)
SELECT count(*) FROM ins"""
"""The stream path's record: the attempt's row locking its event (an erasure waits for it, as for a
replay's), its counts and the circuit it closes; no task to update. The rows go as the recorder sends them
(one array of the composite ``delivery_record``, migration 0038), so both paths pay the same encoding."""

_READ = """
SELECT e.method, e.headers, e.headers_base64, e.body, e.idempotency_key, e.body_expired_at, e.provider,
       e.event_type, e.labels, e.traceparent, d.name, d.url, d.headers AS destination_headers, d.signing_secret,
       d.sign_deliveries, d.rate_limit_per_s, d.deduplicate_window_s, d.transform_digest, d.propagate_trace,
       d.auth_version, d.previous_signing_secret, d.previous_secret_expires_at, d.transform_crashed_at
  FROM unnest($1::text[], $2::timestamptz[], $3::text[]) AS u(id, received_at, destination_id)
  JOIN events e ON e.id = u.id AND e.received_at = u.received_at
  JOIN destinations d ON d.id = u.destination_id"""
"""What the claim's joins give a leased task today (``control.db.leased.LEASED_COLUMNS``), read for stream
entries that carry only the attempt's identity (``stream+read``): the claim's read without its update."""


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _row(event_id: str, endpoint_id: str, task_id: str | None, destination_id: str, rule_id: str, rid: str) -> tuple:
    now = datetime.now(UTC)
    body = b'{"id": "x", "type": "payment_intent.succeeded"}'
    headers = {"content-type": "application/json", "webhook-id": event_id, "webhook-signature": "v1,abc"}
    return (rid, endpoint_id, event_id, task_id, destination_id, "sink", "http://127.0.0.1/hook", rule_id, "rule",
            1, headers, body, 200, b"ok", 3, True, None, now, None, None, None, None)  # fmt: skip


class Meter:
    """CPU of Postgres' backend, this process and Redis, summed over the calls measured."""

    def __init__(self, backend: int, redis_pid: int) -> None:
        self.pids = {"pg": backend, "redis": redis_pid}
        self.total = {"pg": 0, "client": 0, "redis": 0}
        self.steps: dict[str, int] = {}
        """Postgres' CPU by step (store, claim, record)."""

    async def measure(self, call: Awaitable[T], step: str = "") -> T:
        before = {k: _cpu_ns(p) for k, p in self.pids.items()}
        client = time.process_time_ns()
        out = await call
        self.total["client"] += time.process_time_ns() - client
        for k, p in self.pids.items():
            self.total[k] += _cpu_ns(p) - before[k]
        if step:
            self.steps[step] = self.steps.get(step, 0) + _cpu_ns(self.pids["pg"]) - before["pg"]
        return out


async def _ingest(r: aioredis.Redis, stream: str, recs: list) -> list[tuple[str, list]]:
    """The edge's entries (``PER_ENTRY`` records each) read by the flush group: (entry id, its records)."""
    for i in range(0, len(recs), PER_ENTRY):
        await r.xadd(stream, {"r": msgspec.msgpack.encode([x.id for x in recs[i : i + PER_ENTRY]])})
    got = await r.xreadgroup("flush", "c", {stream: ">"}, count=len(recs))
    entries = [(eid.decode(), recs[i * PER_ENTRY : (i + 1) * PER_ENTRY]) for i, (eid, _) in enumerate(got[0][1])]
    return entries


async def _today(conn, r, m: Meter, stream: str, endpoint: str, dst: str, rule: str) -> int:
    recs = bench_records(endpoint, EVENTS)
    entries = await _ingest(r, stream, recs)
    for i in range(0, len(recs), FLUSH_BATCH):
        part = recs[i : i + FLUSH_BATCH]
        tasks = [(ids.new_id("task"), x.id, rule, dst) for x in part]

        async def store(part: list[Any] = part, tasks: list[tuple[str, ...]] = tasks) -> None:
            async with conn.transaction():
                await store_batch(conn, [event_row(x) for x in part], tasks)

        await m.measure(store(), "store")
    acked = [e for e, _ in entries]
    pipe = r.pipeline(transaction=False)
    pipe.xack(stream, "flush", *acked).xdel(stream, *acked)
    await m.measure(pipe.execute())
    ask = db_tasks.Claim(free=BATCH, window=BATCH, blocked=(), room={}, per_destination=10**6, lease_s=60)
    done = 0
    while True:
        claimed, *_ = await m.measure(db_tasks.claim_ready(conn, ask), "claim")
        if not claimed:
            break

        async def write(claimed: list[Any] = claimed) -> int:
            rows = [_row(t.event_id, endpoint, t.id, dst, rule, ids.new_id("dlv")) for t in claimed]
            results = [(t.id, t.attempts, "succeeded", None, None) for t in claimed]
            return await records.write(conn, rows, results, [dst])

        done += await m.measure(write(), "record")
    return done


async def _decode(got: list, endpoint: str) -> tuple[list[tuple], list[datetime], list[bytes]]:
    """The attempts of first-attempt entries as record rows, each id derived from its entry and position."""
    rows, received, eids = [], [], []
    for eid, fields in got[0][1]:
        eids.append(eid)
        for n, (event_id, at_us, rule_id, dst_id) in enumerate(msgspec.msgpack.decode(fields[b"a"])):
            rows.append(_row(event_id, endpoint, None, dst_id, rule_id, f"dlv_{eid.decode()}_{n}"))
            received.append(datetime.fromtimestamp(at_us / 1e6, UTC))
    return rows, received, eids


async def _record(
    conn: Any,
    r: aioredis.Redis,
    first: str,
    rows: list[tuple[Any, ...]],
    received: list[datetime],
    eids: list[bytes],
    dst: str,
) -> int:
    """The records in one statement, then their entries acknowledged and deleted."""
    n: int = await conn.fetchval(_RECORD_ONLY, records._records(rows), received, [dst])
    pipe = r.pipeline(transaction=False)
    pipe.xack(first, "deliver", *eids).xdel(first, *eids)
    await pipe.execute()
    return n


async def _stream(conn, r, m: Meter, stream: str, first: str, endpoint: str, dst: str, rule: str, read: bool) -> int:
    recs = bench_records(endpoint, EVENTS)
    entries = await _ingest(r, stream, recs)
    handoff = r.register_script(_HANDOFF)
    for i in range(0, len(entries), FLUSH_BATCH // PER_ENTRY):
        chunk = entries[i : i + FLUSH_BATCH // PER_ENTRY]
        part = [x for _, rs in chunk for x in rs]

        async def store(part: list[Any] = part, chunk: list[tuple[str, list[Any]]] = chunk) -> None:
            async with conn.transaction():
                await store_batch(conn, [event_row(x) for x in part])
            argv: list[object] = ["flush"]
            for eid, rs in chunk:  # what the flush routed: (event, received_at, rule, destination)
                argv += [eid, msgspec.msgpack.encode([(x.id, x.received_at_us, rule, dst) for x in rs])]
            await handoff(keys=[stream, first], args=argv)

        await m.measure(store(), "store")
    done = 0
    while True:
        got = await m.measure(r.xreadgroup("deliver", "c", {first: ">"}, count=BATCH // PER_ENTRY))
        if not got or not got[0][1]:
            break

        rows, received, eids = await m.measure(_decode(got, endpoint))
        if read:
            await m.measure(conn.fetch(_READ, [x[2] for x in rows], received, [x[4] for x in rows]), "read")
        done += await m.measure(_record(conn, r, first, rows, received, eids, dst), "record")
    return done


async def _run(settings: Settings) -> None:
    endpoint = (await create_endpoint(settings)).id
    dst, rule = await route_to_sink(settings.database_url or "", endpoint, "http://127.0.0.1:9/hook")
    conn = await connect(settings.database_url or "")
    r = aioredis.Redis.from_url(settings.redis_url)
    stream, first = f"{settings.redis_prefix}{{h}}", f"{settings.redis_prefix}{{h}}:first"
    await r.xgroup_create(stream, "flush", id="0", mkstream=True)
    await r.xgroup_create(first, "deliver", id="0", mkstream=True)
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    redis_pid = int((await r.info("server"))["process_id"])
    print(f"events {EVENTS} a round, {PER_ENTRY} records per ingest entry, load {os.getloadavg()[0]:.1f}")
    for rnd in range(ROUNDS):
        for name in ("today", "stream", "stream+read"):
            m = Meter(backend, redis_pid)
            if name == "today":
                done = await _today(conn, r, m, stream, endpoint, dst, rule)
            else:
                done = await _stream(conn, r, m, stream, first, endpoint, dst, rule, name == "stream+read")
            assert done == EVENTS, (name, done)
            per = {k: round(v / 1000 / done, 1) for k, v in m.total.items()}
            steps = {k: round(v / 1000 / done, 1) for k, v in m.steps.items()}
            total = round(sum(per.values()), 1)
            print(f"round {rnd} {name:11} per delivered event µs: {per} sum {total}; pg by step {steps}")
    await conn.close()
    await r.aclose()


if __name__ == "__main__":
    with bench_env() as bench:
        asyncio.run(_run(bench.settings))
