"""Erasure: ``POST /v1/endpoints/{id}/events/erase {field, value}`` and the job it records.

A person asks for their data to be deleted. The request names a field in the condition-tree syntax (the
very validator of rules: ``control.routing.conditions``) and a scalar value (a string or an integer of up
to 1,000 characters or digits, a finite number, a boolean; anything else is a 400 naming ``value``); an
event matches when a condition ``{field, operator: "equals", value}`` would match it, exactly (``2000``
equals ``"2000"``, a body that is not JSON has no body field). The request only records a job and answers 202; the
``erasures`` worker does the work (``control.workers.erasures.step``), so an erasure of any size is many
short transactions and never a long lock.

The job row is also the audit answer: the field, the counts, when it ran, and ``value_sha256`` instead of
the value once it is done (docs/adr/0038-erasure-jobs.md). Jobs belong to the account and outlive their
endpoint; one of an expired temporary endpoint answers 410 as the endpoint does.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from typing import Any

import asyncpg
import msgspec

from control.db import erasures as db
from control.db.context import Context, Principal
from control.records.erasures import MAX_VALUE_LENGTH, EraseRequest, Erasure, ErasureList
from control.records.storable import check_text
from control.routing import conditions
from control.service.endpoints import require_endpoint, require_write
from control.support import ingest_marks
from control.support.parameter_messages import check_limit
from control.support.provider_checks import provider_name
from shared import ids
from shared.errors import NotFoundError, ValidationError

__all__ = (
    "JOB_PREFIX",
    "MAX_LIST",
    "check_request",
    "erase_events",
    "erasure_record",
    "get_erasure",
    "list_erasures",
    "value_sha256",
)

JOB_PREFIX = "erase"
"""Erasure jobs are ``erase_`` and a ULID."""
MAX_LIST = 100
_TOO_MANY_DIGITS = 10**MAX_VALUE_LENGTH
"""An integer is matched exactly at any size up to here (``control.routing.conditions.text``: never as a
float); past it, as for text, nothing anyone is identified by."""


def check_request(field: object, value: object) -> tuple[str, Any]:
    """(the field as stored, the value), or ValidationError naming ``field`` or ``value``. Shared by /v1 (whose
    body is already typed) and MCP (whose arguments are checked here too)."""
    if not isinstance(field, str):
        raise ValidationError("field: must be a string such as body.data.object.customer")
    check_text(field, "field")
    try:
        leaf = conditions.validate({"field": field, "operator": "exists"}, path="erase")
    except conditions.InvalidConditionTree as exc:  # "erase.field: ..." names the leaf's part
        raise ValidationError(str(exc).replace("erase.field:", "field:", 1)) from None
    if isinstance(value, str):
        check_text(value, "value")
        if len(value) > MAX_VALUE_LENGTH:
            raise ValidationError(f"value: longer than {MAX_VALUE_LENGTH} characters")
        if value == "":
            raise ValidationError("value: must not be empty (it would match every event whose field is empty)")
        if leaf["field"] == "meta.provider":  # as a rule's condition: events carry the catalog's own name
            value = provider_name(value, "value")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError("value: must be a finite number")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _TOO_MANY_DIGITS:
        raise ValidationError(f"value: an integer of more than {MAX_VALUE_LENGTH} digits")
    elif not isinstance(value, bool | int):
        kind = "null" if value is None else type(value).__name__
        raise ValidationError(f"value: must be a string, number or boolean, got {kind}")
    return leaf["field"], value


def value_sha256(job_id: str, value: Any) -> str:
    """Hex SHA-256 of ``<job id>:<value as JSON>``: salted by the job, so equal values of two jobs do not
    hash alike, and checkable by whoever holds the value."""
    return hashlib.sha256(job_id.encode() + b":" + msgspec.json.encode(value)).hexdigest()


def erasure_record(row: asyncpg.Record | dict[str, Any]) -> Erasure:
    value = row["value"]
    return Erasure(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        field=row["field"],
        value=value,
        value_sha256=row["value_sha256"],
        state=row["state"],
        matched=row["matched"],
        erased=row["erased"],
        deliveries_erased=row["deliveries_erased"],
        dead_letters_erased=row["dead_letters_erased"],
        schemas_scrubbed=row["schemas_scrubbed"],
        scanned=row["scanned"],
        error=row["error"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


async def erase_events(ctx: Context, principal: Principal, endpoint_id: str, data: EraseRequest) -> Erasure:
    """Records the job (pending) and answers it; the worker erases. The ingest streams' positions are taken
    once the endpoint is known: what the edge acknowledged up to now is erased too, once the flush stored it
    (``control.workers.erasures.step``)."""
    require_write(principal)
    field, value = check_request(data.field, data.value)
    job_id = ids.new_id(JOB_PREFIX)
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        marks = await ingest_marks.marks(ctx.redis, ctx.keys)
        row = await db.create_job(
            conn,
            job_id=job_id,
            account_id=principal.account_id,
            endpoint_id=endpoint_id,
            field=field,
            value=value,
            sha256=value_sha256(job_id, value),
            ingest_marks=marks,
        )
    return erasure_record(row)


def _not_found(erasure_id: str) -> NotFoundError:
    return NotFoundError(f"erasure {erasure_id[:100]!r} not found")


async def get_erasure(ctx: Context, principal: Principal, erasure_id: str) -> Erasure:
    if not ids.is_id(erasure_id, JOB_PREFIX):
        raise _not_found(erasure_id)
    async with ctx.pool.acquire() as conn:
        row = await db.get_job(conn, principal.account_id, erasure_id)
        if row is None:
            raise _not_found(erasure_id)
        # 410 for an expired endpoint's job; the record of a deleted endpoint's job stays readable (audit)
        with contextlib.suppress(NotFoundError):
            await require_endpoint(conn, principal, row["endpoint_id"])
    return erasure_record(row)


async def list_erasures(
    ctx: Context, principal: Principal, *, endpoint_id: str | None = None, cursor: str | None = None, limit: int = 20
) -> ErasureList:
    """The account's erasures, newest first (of one endpoint with ``endpoint_id``)."""
    check_limit(limit, MAX_LIST)
    if cursor is not None and not ids.is_id(cursor, JOB_PREFIX):
        raise ValidationError("cursor: not a cursor of this list (the next_cursor of a previous page)")
    async with ctx.pool.acquire() as conn:
        if endpoint_id is not None:
            await require_endpoint(conn, principal, check_text(endpoint_id, "endpoint_id"))
        rows = await db.list_jobs(conn, principal.account_id, endpoint_id=endpoint_id, before=cursor, limit=limit + 1)
    more = len(rows) > limit
    records = [erasure_record(r) for r in rows[:limit]]
    return ErasureList(erasures=records, next_cursor=records[-1].id if more else None)
