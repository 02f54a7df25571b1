"""Running an erasure job, one bounded step at a time (``control.workers.erasures.loop`` calls ``advance``).

Stages, each step one transaction on the job's locked row (several workers share the jobs, never one job):

- ``ingest``: waits, without blocking a worker, until the flush has stored every record the edge had
  acknowledged when the erasure was requested (``control.support.ingest_marks``: the job's marks in the
  ingest streams); the scan that follows sees them;
- ``events``: the next page of the endpoint's events after the cursor (every day partition), its candidates
  decided exactly by the condition trees' own ``equals`` (``control.routing.conditions``), the matched ones
  erased with their deliveries, tasks and deduplication keys (``control.db.erasures.erase``), and the
  cursor and counts moved, all in one commit: a worker killed mid-job leaves the job at its last page, and
  the next step of any worker resumes there, so every event is counted and erased once;
- ``deferred``: matched events that had an attempt in flight are erased once it is recorded (the attempt's
  record would otherwise be written after the erasure, bodies and all);
- ``finish``: the dead letters of the endpoint that match (Redis), and the value's hashes in the correlation
  sketches of the schemas learned on the endpoint; then the job is done and its value dropped.

The scan has no upper bound: events stored while the job runs are looked at too, until a page comes back
short. Records the edge acknowledged after the request, still in the ingest stream when the job finishes,
are not (they were sent after the person asked).

A step that fails for the infrastructure (``control.db.faults.UNAVAILABLE``: Postgres or Redis away) is
raised to the loop, which waits it out with its backoff; the job is untouched (every job would fail alike).
A step that fails for any other reason (``JobDataError``: a stored field that no longer compiles, a row or
schema state that cannot be read; a value Postgres refuses; or a bug met by this job's data alone, such as
the ``OverflowError`` a 310-digit integer once raised) is counted on the job with ``error`` saying why,
retried after ``retry_s`` times its failures, and after ``MAX_FAILURES`` in a row the job is ``failed``. A
failed step moves the job behind every other (``checked_at``), so it never holds the loop: other jobs, of
its account and of every other, take the steps between its retries (``control.db.erasures.take_job``: the
account served least recently goes first).
"""

from __future__ import annotations

import logging
import random
from typing import Any

import asyncpg
import msgspec

from control.db import erasures as db
from control.db import labels as db_labels
from control.db.connection import Connection, Row
from control.db.context import Context
from control.db.faults import UNAVAILABLE, describe
from control.records.storable import storable
from control.routing.conditions import LABEL_PREFIX, MISSING, EventView, compile_tree, text_form
from control.routing.conditions.text import as_number
from control.routing.labels import LabelRule, compile_label, labels_of
from control.schemas.batch import hash_value
from control.schemas.scrub import drop_fields, drop_keys, scrub
from control.schemas.state import decode_state, encode_state
from control.support import dead_letters, ingest_marks
from shared.errors import JobDataError
from shared.wire import IngestRecord, decode_records

__all__ = ("MAX_FAILURES", "PAGE", "RETRY_S", "advance", "candidates", "matcher", "value_hashes")

log = logging.getLogger("hookyard.erasure")

PAGE = 1000
"""Events looked at per step (one transaction): measured on the bench database (docs/reference/retention.md)."""
MAX_FAILURES = 5
"""Steps in a row that may fail for the job's data before the job is ``failed``."""
MAX_ERROR = 1000
"""Characters of a failed step's ``error`` kept on the job."""
RETRY_S = 10.0
"""A job whose step failed for its data is tried again after this many seconds times its failures."""
_DEFERRED = 500
_decode = msgspec.json.Decoder().decode


def matcher(field: str, value: Any) -> Any:
    """The predicate of ``{field, equals, value}``: what decides a match, for events and dead letters alike."""
    try:
        return compile_tree({"field": field, "operator": "equals", "value": value})
    except Exception as exc:  # the validator of the request accepted them; what is stored now does not compile
        raise JobDataError(f"the stored field and value no longer make a condition ({describe(exc)})") from exc


def candidates(field: str, value: Any) -> db.Candidates:
    """An SQL condition every event the predicate matches satisfies (and few others), so a page carries back
    only those. A JSON string without a backslash decodes to its raw bytes, so a text at a body path is in
    the raw body unless the body has an escape; a number may be written many ways (``2e3``), so it is not."""
    text = text_form(value)
    kind, _, rest = field.partition(".")
    if kind == "body" or field == "body":
        utf8 = "e.body_is_utf8 AND e.body_expired_at IS NULL"
        if as_number(value) is not None:
            return db.Candidates(utf8)
        return db.Candidates(
            f"{utf8} AND (position({{}}::bytea IN e.body) > 0 OR position({{}}::bytea IN e.body) > 0)",
            (text.encode(), b"\\"),
        )
    if kind == "header":
        return db.Candidates("e.headers ->> {} = {}", (rest, text))
    if rest.startswith(LABEL_PREFIX):
        label = [{"key": rest.removeprefix(LABEL_PREFIX), "value": text}]
        return db.Candidates("e.labels @> {}::jsonb", (label,))
    return db.Candidates("true")


def value_hashes(value: Any) -> set[int]:
    """The hashes a correlation sketch keeps for the values ``equals`` matches: the text, and the integer the
    text stands for (``"42"`` equals ``42``, and a sketch hashes the two apart)."""
    hashes = {hash_value(text_form(value))}
    number = as_number(value)
    if type(number) is int or (type(number) is float and number.is_integer()):
        hashes.add(hash_value(int(number)))  # exact for an int of any size (a float past 1e308 is never one)
    return hashes


def _view(row: Row, endpoint_id: str, environment: str | None) -> EventView:
    body: object = MISSING
    if row["body"]:
        try:
            body = _decode(row["body"])
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # too deep: as not JSON
            body = MISSING
    meta: dict[str, object] = {k: row[k] for k in ("provider", "event_type", "method", "path", "content_type")}
    meta |= {"source_ip": row["source_ip"], "signature_valid": row["signature_valid"]}
    meta |= {"ip_allowed": row["ip_allowed"], "endpoint_id": endpoint_id, "environment": environment}
    for label in row["labels"] or ():  # jsonb arrives decoded (control.db's codec)
        meta[LABEL_PREFIX + label["key"]] = label["value"]
    return EventView(body, row["headers"], meta)


def _dead_letter_view(record: IngestRecord, environment: str | None, rules: tuple[LabelRule, ...]) -> EventView:
    """The record as the flush would have stored it, labels included: the endpoint's label rules applied to
    it now, as the flush applies them to each new event (``control.routing.route``)."""
    headers: dict[str, str] = {}
    for name, raw in record.headers:
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            continue
        key = name.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    row = {
        "body": record.body,
        "headers": headers,
        "labels": (),
        "provider": record.provider,
        "event_type": record.event_type,
        "method": record.method,
        "path": "/" + record.path,
        "content_type": headers.get("content-type"),
        "source_ip": record.source_ip,
        "signature_valid": record.signature_valid,
        "ip_allowed": record.ip_allowed,
    }
    view = _view(row, record.endpoint_id, environment)
    labels = labels_of(rules, view) if rules else []
    if not labels:
        return view
    return view._replace(meta={**view.meta, **{LABEL_PREFIX + label["key"]: label["value"] for label in labels}})


async def advance(
    ctx: Context, *, page: int = PAGE, exclude: list[str] | None = None, retry_s: float = RETRY_S
) -> tuple[str | None, int]:
    """One step of the unfinished job advanced least recently: (its id, how much moved); (None, 0) when no job
    is left to take. A step that moved nothing (waiting for the flush, or its deferred events still in
    flight) lets the caller try another job (``exclude``)."""
    job = None
    async with ctx.pool.acquire() as conn:
        try:
            async with conn.transaction():
                job = await db.take_job(conn, exclude=exclude or [], retry_s=retry_s)
                if job is None:
                    return None, 0
                return job["id"], await _step(ctx, conn, job, page)
        except Exception as exc:
            if job is None or isinstance(exc, UNAVAILABLE):
                raise
            why = str(exc) if isinstance(exc, JobDataError) else describe(exc)
            error = storable(f"{job['stage']} stage: {why}")[:MAX_ERROR]
            failed = await db.fail_step(conn, job["id"], error=error, limit=MAX_FAILURES)
    if failed is not None and failed["state"] == "failed":
        log.error("erasure %s failed after %d tries: %s", failed["id"], failed["failures"], failed["error"])
    elif failed is not None:
        log.warning("erasure %s: step failed (%s); retrying", failed["id"], failed["error"])
    return job["id"], 1


async def _step(ctx: Context, conn: Connection, job: asyncpg.Record, page: int) -> int:
    if job["environment"] is None:  # the endpoint was deleted, and its events with it
        await db.finish(conn, job["id"], state="completed", dead_letters=0, schemas=0, error=None)
        return 1
    value = job["value"]
    if job["stage"] == "ingest":
        return await _ingest(ctx, conn, job)
    if job["stage"] == "events":
        return await _page(conn, job, value, page)
    if job["stage"] == "deferred":
        return await _deferred(conn, job)
    return await _finish(ctx, conn, job, value)


async def _ingest(ctx: Context, conn: Connection, job: asyncpg.Record) -> int:
    """Moves on to the scan once the flush stored what the edge had acknowledged at the request."""
    if await ingest_marks.stored_through(ctx.redis, ctx.keys, list(job["ingest_marks"] or ())) is not None:
        return 0
    await db.save_progress(conn, job["id"], stage="events", scanned_at=None, scanned_id=None)
    return 1


async def _erase(conn: Connection, job: asyncpg.Record, matched: list[tuple[str, Any]]) -> tuple[int, int]:
    """Erases the matched events that have no attempt in flight; defers the others. (events, deliveries)."""
    busy = await db.busy(conn, job["endpoint_id"], [m[0] for m in matched]) if matched else set()
    if busy:
        await db.defer(conn, job["id"], [m for m in matched if m[0] in busy])
    erased = await db.erase(conn, job["endpoint_id"], [m for m in matched if m[0] not in busy])
    return erased.events, erased.deliveries


def _matches(predicate: Any, row: asyncpg.Record, endpoint_id: str, environment: str | None) -> bool:
    """Whether the event matches; an event whose stored columns cannot be read as the flush made them (a
    poison row) stops the job, named, rather than being passed over with the value perhaps in it."""
    try:
        return bool(predicate(_view(row, endpoint_id, environment)))
    except Exception as exc:
        raise JobDataError(f"event {row['id']} cannot be read to match it ({describe(exc)})") from exc


async def _page(conn: Connection, job: asyncpg.Record, value: Any, size: int) -> int:
    found = await db.page(
        conn,
        job["endpoint_id"],
        after_at=job["scanned_at"],
        after_id=job["scanned_id"],
        size=size,
        candidates=candidates(job["field"], value),
    )
    predicate = matcher(job["field"], value)
    environment = job["environment"]
    endpoint_id = job["endpoint_id"]
    matched = [(r["id"], r["received_at"]) for r in found.rows if _matches(predicate, r, endpoint_id, environment)]
    events, deliveries = await _erase(conn, job, matched)
    last = found.visited < size
    await db.save_progress(
        conn,
        job["id"],
        stage="deferred" if last else "events",
        scanned_at=found.last_at or job["scanned_at"],
        scanned_id=found.last_id or job["scanned_id"],
        scanned=found.visited,
        matched=len(matched),
        erased=events,
        deliveries=deliveries,
    )
    return found.visited + 1


async def _deferred(conn: Connection, job: asyncpg.Record) -> int:
    waiting = await db.deferred(conn, job["id"], _DEFERRED)
    if not waiting:
        await db.save_progress(
            conn, job["id"], stage="finish", scanned_at=job["scanned_at"], scanned_id=job["scanned_id"]
        )
        return 1
    busy = await db.busy(conn, job["endpoint_id"], [w[0] for w in waiting])
    ready = [w for w in waiting if w[0] not in busy]
    if not ready:
        return 0
    erased = await db.erase(conn, job["endpoint_id"], ready)
    await db.undefer(conn, job["id"], [w[0] for w in ready])
    await db.save_progress(
        conn,
        job["id"],
        stage="deferred",
        scanned_at=job["scanned_at"],
        scanned_id=job["scanned_id"],
        erased=erased.events,
        deliveries=erased.deliveries,
    )
    return len(ready)


async def _dead_letters(
    ctx: Context, conn: Connection, endpoint_id: str, predicate: Any, environment: str | None
) -> int:
    """Removes the endpoint's dead letters whose record matches, labels computed by the endpoint's label
    rules as the flush would have; each XDEL is idempotent."""
    rules = tuple(
        compile_label(r["source"], r["path"], r["output_key"], r["color"])
        for r in await db_labels.for_endpoints(conn, [endpoint_id])
    )
    removed = 0
    for shard in range(ctx.keys.shards):
        stream = ctx.keys.dead_letter_stream(shard)
        start = "-"
        while True:
            entries = await dead_letters.entries(ctx.redis, ctx.keys, shard, after=start, count=500)
            for entry_id, fields in entries:
                if fields.get(b"endpoint", b"").decode("utf-8", "replace") != endpoint_id:
                    continue
                try:
                    records = decode_records(fields.get(b"r", b""))
                except (msgspec.MsgspecError, ValueError):
                    continue
                if any(predicate(_dead_letter_view(r, environment, rules)) for r in records):
                    removed += await ctx.redis.xdel(stream, entry_id)
            if len(entries) < 500:
                break
            start = "(" + entries[-1][0]
    return removed


async def _drop_version_fields(conn: Connection, schema_ids: list[str], keys: frozenset[str]) -> None:
    """Every stored version of these schemas loses the fields the value named (the diff and generated code
    are made from them)."""
    changed = []
    for schema_id, version, raw in await db.schema_versions(conn, schema_ids):
        kept = drop_fields(_decode(raw), keys)
        if kept is not None:
            changed.append((schema_id, version, msgspec.json.encode(kept).decode()))
    await db.store_version_fields(conn, changed)


async def _finish(ctx: Context, conn: Connection, job: asyncpg.Record, value: Any) -> int:
    """Dead letters, then the sketches and the job's end, under the job's lock (no other worker finishes it
    too). The dead letters' XDEL cannot roll back: a worker killed after it does the stage again, harmlessly,
    but counts only what is left."""
    predicate = matcher(job["field"], value)
    dead = await _dead_letters(ctx, conn, job["endpoint_id"], predicate, job["environment"])
    hashes, keys = value_hashes(value), frozenset({text_form(value)})
    updates, renamed = [], []
    for schema_id, raw in await db.schema_states(conn, job["endpoint_id"]):
        try:
            state = decode_state(raw)
        except Exception as exc:
            raise JobDataError(f"the state of schema {schema_id} cannot be read ({describe(exc)})") from exc
        sketches = scrub(state, hashes) if raw else 0
        named = drop_keys(state, keys) if raw else 0
        if sketches or named:
            updates.append((schema_id, encode_state(state), random.getrandbits(62)))
        if named:
            renamed.append(schema_id)
    await db.store_schema_states(conn, updates)
    await _drop_version_fields(conn, renamed, keys)
    done = await db.finish(conn, job["id"], state="completed", dead_letters=dead, schemas=len(updates), error=None)
    log.info(
        "erasure %s completed: field %s, value sha256 %s, %d matched, %d erased, %d deliveries, %d dead letters, "
        "%d schemas scrubbed",
        done["id"],
        done["field"],
        done["value_sha256"],
        done["matched"],
        done["erased"],
        done["deliveries_erased"],
        done["dead_letters_erased"],
        done["schemas_scrubbed"],
    )
    return 1
