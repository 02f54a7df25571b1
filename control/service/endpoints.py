"""Endpoints: the ingest URLs an account owns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
import msgspec

from control.db import accounts as db_accounts
from control.db import endpoints as db_endpoints
from control.db import events as db_events
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records.endpoints import (
    Endpoint,
    EndpointCreate,
    EndpointCreated,
    EndpointList,
    EndpointResponse,
    EndpointUpdate,
)
from control.records.storable import check_text
from control.service.accounts import TEMPORARY_LIFETIME, require_live_key, temporary_advice
from control.support import edge_config, sealing
from control.support.long_poll import ENDPOINT_GONE
from control.support.text_checks import check_external_ref, check_name
from shared import ids
from shared.errors import ConflictError, ForbiddenError, GoneError, NotFoundError, QuotaExceededError, ValidationError
from shared.logs import bind

__all__ = (
    "create_endpoint",
    "delete_endpoint",
    "endpoint_rows",
    "expired_error",
    "get_endpoint",
    "ingest_url",
    "list_endpoints",
    "lock_owned",
    "none_left",
    "require_endpoint",
    "require_event",
    "require_owned",
    "require_write",
    "update_endpoint",
)


def ingest_url(ctx: Context, token: str) -> str:
    return f"{ctx.settings.edge_url}/h/{token}"


def _endpoint(ctx: Context, row: asyncpg.Record) -> Endpoint:
    return Endpoint(
        id=row["id"],
        name=row["name"],
        environment=row["environment"],
        external_ref=row["external_ref"],
        ingest_url=ingest_url(ctx, row["ingest_token"]),
        temporary=row["temporary"],
        expires_at=row["expires_at"],
        expect_event_within_s=row["expect_event_within_s"],
        signature_failure_alert_threshold=row["signature_failure_alert_threshold"],
        body_retention_days=row["body_retention_days"],
        response=None if row["response"] is None else msgspec.convert(row["response"], EndpointResponse),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def require_write(principal: Principal) -> None:
    if principal.read_only:
        raise ForbiddenError("this API key is read-only")


async def require_endpoint(conn: Connection, principal: Principal, endpoint_id: str) -> asyncpg.Record:
    """The caller's endpoint, or 404: another account's id is indistinguishable from an unknown one.

    Every route that names an endpoint, or an object of one (event, destination, rule, label, delivery,
    allowlist entry, retry job), passes here with that endpoint's id, on /v1, over MCP and in the inbox: so
    this is the one place that answers 410 ``endpoint_expired`` for a temporary endpoint past its
    ``expires_at``, as the edge does. Its data stays, unreachable, until the sweep removes it
    (``control.workers.sweep.expired_endpoints``).
    """
    row = await db_endpoints.get(conn, principal.account_id, endpoint_id) if ids.is_id(endpoint_id, "ep") else None
    if row is None:
        raise _not_found(endpoint_id)
    bind(endpoint_id=row["id"])  # the request's log lines name the endpoint from here on
    if row["expired"]:
        raise expired_error(row["id"], row["expires_at"])
    return row


AccountGet = Callable[[Connection, str, str], Awaitable[asyncpg.Record | None]]
"""A ``control.db`` look-up of one object by (account id, object id), ``None`` when the account has none."""


async def require_owned(
    conn: Connection,
    principal: Principal,
    object_id: str,
    *,
    kind: str,
    noun: str,
    get: AccountGet,
    field: str = "",
) -> asyncpg.Record:
    """An object of one of the caller's endpoints (an event, a destination, a rule, a label rule) by its id, or
    404 ``{noun} {id!r} not found`` (after ``field: `` when given): an id without the ``kind`` prefix, an
    unknown one and another account's read alike. Its endpoint passes :func:`require_endpoint` (410 when a
    temporary one expired). The one skeleton of every "get by id" of the services."""
    row = await get(conn, principal.account_id, object_id) if ids.is_id(object_id, kind) else None
    if row is None:
        raise NotFoundError(f"{field + ': ' if field else ''}{noun} {object_id!r} not found")
    await require_endpoint(conn, principal, row["endpoint_id"])
    return row


async def require_event(conn: Connection, principal: Principal, event_id: str, *, field: str = "") -> asyncpg.Record:
    """The caller's stored event (``control.db.events`` columns): for reading it, replaying it and trying a
    transform on it."""
    return await require_owned(
        conn, principal, event_id, kind="evt", noun="event", get=db_events.get_for_account, field=field
    )


AccountLock = Callable[[Connection, str, str], Awaitable[str | None]]
"""A ``control.db`` lock of one object by (account id, object id) until the transaction ends: the id of the
object's endpoint, ``None`` when the account has no such object (or it went while this waited)."""


async def lock_owned(
    conn: Connection, principal: Principal, object_id: str, *, kind: str, noun: str, lock: AccountLock
) -> str:
    """:func:`require_owned` for a change that holds the object until it commits (``lock``, in the caller's
    transaction): the id of its endpoint, which passed :func:`require_endpoint`, or 404 ``{noun} {id!r} not
    found``."""
    endpoint_id = await lock(conn, principal.account_id, object_id) if ids.is_id(object_id, kind) else None
    if endpoint_id is None:
        raise NotFoundError(f"{noun} {object_id!r} not found")
    await require_endpoint(conn, principal, endpoint_id)
    return endpoint_id


async def endpoint_rows(
    conn: Connection,
    principal: Principal,
    endpoint_id: str,
    list_for_endpoint: Callable[[Connection, str], Awaitable[list[asyncpg.Record]]],
) -> list[asyncpg.Record]:
    """The rows of one kind under the caller's endpoint (its destinations, rules, label rules), once the
    endpoint passed :func:`require_endpoint`: the one skeleton of every list under an endpoint."""
    await require_endpoint(conn, principal, endpoint_id)
    return await list_for_endpoint(conn, endpoint_id)


def expired_error(endpoint_id: str, expires_at: datetime) -> GoneError:
    at = expires_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return GoneError(
        f"endpoint {endpoint_id!r} expired at {at}: a temporary endpoint lasts "
        f"{TEMPORARY_LIFETIME.days} days, and its events and settings are deleted soon after; get a new one "
        "with POST /api/start, or a permanent one with the MCP tool create_endpoint or POST /v1/endpoints",
        code="endpoint_expired",
    )


def _not_found(endpoint_id: str) -> NotFoundError:
    return NotFoundError(f"endpoint {endpoint_id!r} not found")


def _ref_taken(ref: str | None) -> ConflictError:
    return ConflictError(
        f"external_ref: {ref!r} is already used by another endpoint of this account", code="external_ref_taken"
    )


async def list_endpoints(ctx: Context, principal: Principal, *, external_ref: str | None = None) -> EndpointList:
    check_external_ref(external_ref)
    async with ctx.pool.acquire() as conn:
        rows = await db_endpoints.list_for_account(conn, principal.account_id, external_ref=external_ref)
    return EndpointList(endpoints=[_endpoint(ctx, r) for r in rows])


async def get_endpoint(ctx: Context, principal: Principal, endpoint_id: str) -> Endpoint:
    async with ctx.pool.acquire() as conn:
        return _endpoint(ctx, await require_endpoint(conn, principal, endpoint_id))


async def _free_ref(conn: Connection, account_id: str, ref: str | None) -> list[db_endpoints.Deleted]:
    """An expired endpoint holds its ``external_ref`` until the sweep, though it is gone for the account: an
    endpoint that takes the ref now has it deleted first (as /api/start does), else the ref would be 409
    ``external_ref_taken`` by an endpoint no list shows. The caller tombstones what comes back."""
    held = await db_endpoints.expired_with_ref(conn, account_id, ref) if ref is not None else None
    return await db_endpoints.delete_expired(conn, limit=1, endpoint_ids=[held]) if held else []


async def _tombstone(ctx: Context, gone: list[db_endpoints.Deleted]) -> None:
    for deleted in gone:
        await edge_config.remove(ctx, deleted.ingest_token, deleted.tombstone_version)


async def create_endpoint(ctx: Context, principal: Principal, data: EndpointCreate) -> EndpointCreated:
    require_write(principal)
    await require_live_key(ctx, principal, "create endpoints")
    check_name(data.name, "name")
    check_external_ref(data.external_ref)
    secret = ids.signing_secret()
    async with ctx.pool.acquire() as conn:
        async with conn.transaction():
            account = await db_accounts.lock_account(conn, principal.account_id)
            quota = account["endpoint_quota"] if account else None
            if quota is None and ctx.settings.endpoint_quota:
                quota = ctx.settings.endpoint_quota  # HOOKYARD_ENDPOINT_QUOTA: every account is bounded
            if quota is not None and await db_endpoints.count_for_account(conn, principal.account_id) >= quota:
                raise QuotaExceededError(f"this account has reached its quota of {quota} endpoints")
            gone = await _free_ref(conn, principal.account_id, data.external_ref)
            endpoint_id = ids.new_id("ep")
            try:
                row = await db_endpoints.insert(
                    conn,
                    endpoint_id=endpoint_id,
                    account_id=principal.account_id,
                    name=data.name,
                    environment=data.environment,
                    external_ref=data.external_ref,
                    ingest_token=ids.ingest_token(),
                    temporary=data.temporary,
                    expires_at=datetime.now(UTC) + TEMPORARY_LIFETIME if data.temporary else None,
                    signing_secret=sealing.seal_endpoint_secret(ctx, endpoint_id, secret),
                )
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name == "endpoints_external_ref_unique":
                    raise _ref_taken(data.external_ref) from None
                raise
        await _tombstone(ctx, gone)
        await edge_config.sync(ctx, conn, [row["id"]])
    return EndpointCreated(**msgspec.structs.asdict(_endpoint(ctx, row)), signing_secret=secret)


async def update_endpoint(ctx: Context, principal: Principal, endpoint_id: str, data: EndpointUpdate) -> Endpoint:
    require_write(principal)
    changes = {f: v for f in data.__struct_fields__ if (v := getattr(data, f)) is not msgspec.UNSET}
    if "name" in changes:
        check_name(changes["name"], "name")
    check_external_ref(changes.get("external_ref"))
    if isinstance(changes.get("response"), EndpointResponse):
        check_text(changes["response"].body, "response.body")
        if changes["response"].status in (204, 205) and changes["response"].body:
            raise ValidationError(f"response.body: a {changes['response'].status} answer has no body")
        changes["response"] = msgspec.to_builtins(changes["response"])
    if not ids.is_id(endpoint_id, "ep"):
        raise _not_found(endpoint_id)
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        async with conn.transaction():
            gone = await _free_ref(conn, principal.account_id, changes.get("external_ref"))
            try:
                row = await db_endpoints.update(conn, principal.account_id, endpoint_id, changes)
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name == "endpoints_external_ref_unique":
                    # Only a real endpoint can collide, so this is not an existence oracle for other accounts.
                    raise _ref_taken(data.external_ref) from None  # type: ignore[arg-type]  # set: the update changed it
                raise
        await _tombstone(ctx, gone)
        if row is None:
            raise _not_found(endpoint_id)
        if "environment" in changes or "response" in changes:
            await edge_config.sync(ctx, conn, [endpoint_id])
    return _endpoint(ctx, row)


async def delete_endpoint(ctx: Context, principal: Principal, endpoint_id: str) -> str:
    """Deletes a live endpoint; an expired one is 410 like every other route (the sweep deletes it)."""
    require_write(principal)
    if not ids.is_id(endpoint_id, "ep"):
        raise _not_found(endpoint_id)
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        deleted = await db_endpoints.delete(conn, principal.account_id, endpoint_id)
    if deleted is None:
        raise _not_found(endpoint_id)
    await edge_config.remove(ctx, deleted.ingest_token, deleted.tombstone_version)
    await ctx.redis.publish(ctx.keys.event_channel(endpoint_id), ENDPOINT_GONE)  # its long polls answer 404 now
    return endpoint_id


async def none_left(ctx: Context, principal: Principal) -> str | None:
    """After a delete by a temporary token: what its holder should know when the account has no endpoint left,
    since the token cannot create one (``require_live_key``). Said, not refused (ADR 0092): deleting is how
    the holder removes what was captured, and a new token is one ``POST /api/start`` away."""
    if principal.kind != "temporary":
        return None
    async with ctx.pool.acquire() as conn:
        if await db_endpoints.count_for_account(conn, principal.account_id):
            return None
    return (
        "this temporary token's account has no endpoint left, and a temporary token cannot create one: "
        f"POST /api/start for a new token and endpoint, or {await temporary_advice(ctx, principal)}"
    )
