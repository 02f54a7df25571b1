"""``POST /api/start``: a temporary endpoint without an account, and the browser session that finds it again.

Each call that brings no known session makes an anonymous account (``accounts.kind = 'anonymous'``), a
session (the ``hy_session`` cookie; only its SHA-256 is stored) and a temporary endpoint expiring in 3 days.
A call with the session's cookie is answered from that account: the endpoint it already has for the same
``ref`` (or, without ``ref``, its newest one without a ref) comes back with ``reused: true``; a ``ref`` the
session has not used yet gets a new endpoint in the same account. So the anonymous account owns exactly the
session's endpoints, and every token issued to the session reaches exactly those.

Tokens are shown once: every answer carries a new ``hy_tmp_`` token for the session's account (valid for
3 days); earlier ones keep working, up to the newest ``MAX_TOKENS`` per account.

Once the account registered (``control.service.registration``), its session no longer mints anything: a
``ref`` that one of its (now permanent) endpoints carries is 409 ``ref_taken`` (the caller should use its
key), and anything else starts a new anonymous session, as a call without a cookie does.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import get_args

import asyncpg

from control.db import accounts as db_accounts
from control.db import endpoints as db_endpoints
from control.db.connection import Connection
from control.db.context import Context
from control.records.anonymous import StartRequest, TemporaryEndpoint
from control.records.events import Kind
from control.service.accounts import TEMPORARY_LIFETIME, issue_key
from control.service.endpoints import ingest_url
from control.service.inbox_links import lifetime_link
from control.support import edge_config, sealing
from control.support.parameter_messages import not_one_of
from control.support.text_checks import check_external_ref
from shared import ids
from shared.errors import ConflictError, ForbiddenError, ValidationError

__all__ = (
    "MAX_TOKENS",
    "SESSION_COOKIE",
    "Started",
    "require_open",
    "session_hash",
    "start",
)

SESSION_COOKIE = "hy_session"
MAX_TOKENS = 20
"""Usable temporary tokens per anonymous account: each /api/start answer adds one, the oldest beyond this are
revoked, so a script reloading a page cannot grow the table without bound."""
_SESSION = re.compile(r"[A-Za-z0-9_-]{43}")
_PROVIDERS = frozenset(get_args(Kind))
_DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class Started:
    endpoint: TemporaryEndpoint
    session: str
    """The cookie value to (re)set: the caller's own when its session was used, else a new one."""


def require_open(ctx: Context) -> None:
    """``HOOKYARD_REGISTRATION=closed``: neither temporary endpoints nor free accounts are handed out."""
    if ctx.settings.registration == "closed":
        raise ForbiddenError(
            "registration is closed on this instance: ask its operator for an API key", code="registration_closed"
        )


def session_hash(session: str | None) -> bytes | None:
    """The stored form of a session cookie; None for anything that cannot be one of ours (no query)."""
    if session is None or not _SESSION.fullmatch(session):
        return None
    return hashlib.sha256(session.encode()).digest()


def _name(provider_hint: str | None) -> str:
    return f"Temporary {provider_hint} endpoint" if provider_hint else "Temporary endpoint"


async def start(ctx: Context, *, session: str | None, data: StartRequest) -> Started:
    """Answers /api/start for the caller holding ``session`` (the cookie's value, if any)."""
    require_open(ctx)
    ref = check_external_ref(data.ref, "ref")
    if data.provider_hint is not None and data.provider_hint not in _PROVIDERS:  # callers beyond /api/start
        raise ValidationError(not_one_of("provider_hint", sorted(_PROVIDERS), data.provider_hint))
    stored = session_hash(session)
    now = datetime.now(UTC)
    gone: list[db_endpoints.Deleted] = []
    async with ctx.pool.acquire() as conn:
        async with conn.transaction():
            account = await db_accounts.session_account(conn, stored, lock=True) if stored else None
            if account is not None and account.kind != "anonymous":
                if ref is not None and await db_endpoints.list_for_account(conn, account.id, external_ref=ref):
                    raise ConflictError(
                        f"ref: {ref!r} was claimed by the account this session registered; find it with that "
                        f"account's key: GET /v1/endpoints?external_ref=...",
                        code="ref_taken",
                    )
                account = None
            row = None
            if account is None or session is None:  # an account is only found by a session's hash
                session = secrets.token_urlsafe(32)  # 43 characters, 256 bits
                account_id = ids.new_id("acct")
                await db_accounts.insert_account(conn, account_id=account_id, email=None, kind="anonymous")
                await db_accounts.insert_session(conn, hashlib.sha256(session.encode()).digest(), account_id)
            else:
                account_id = account.id
                row = await db_endpoints.session_endpoint(conn, account_id, ref)
                if row is not None and row["expires_at"] is not None and row["expires_at"] <= now:
                    if ref is not None:  # it holds the ref until the sweep: go now, so the ref is free again
                        gone = await db_endpoints.delete_expired(conn, limit=1, endpoint_ids=[row["id"]])
                    row = None
            reused = row is not None
            if row is None:
                row = await _create(ctx, conn, account_id, ref, data.provider_hint, now)
            token = await issue_key(conn, account_id, kind="temporary")
            await db_accounts.revoke_surplus_temporary_keys(conn, account_id, keep=MAX_TOKENS)
        for deleted in gone:
            await edge_config.remove(ctx, deleted.ingest_token, deleted.tombstone_version)
        if not reused:  # the ingest URL answers as soon as the caller has it
            await edge_config.sync(ctx, conn, [row["id"]])
    expires_at: datetime = row["expires_at"]
    return Started(
        endpoint=TemporaryEndpoint(
            endpoint_id=row["id"],
            inbox_url=await lifetime_link(ctx, account_id, row["id"], expires_at),
            ingest_url=ingest_url(ctx, row["ingest_token"]),
            expires_at=expires_at,
            expires_in_days=max(1, math.ceil((expires_at - now).total_seconds() / _DAY_S)),
            reused=reused,
            api_token=token,
        ),
        session=session,
    )


async def _create(
    ctx: Context, conn: Connection, account_id: str, ref: str | None, provider_hint: str | None, now: datetime
) -> asyncpg.Record:
    endpoint_id = ids.new_id("ep")
    return await db_endpoints.insert(
        conn,
        endpoint_id=endpoint_id,
        account_id=account_id,
        name=_name(provider_hint),
        environment="development",
        external_ref=ref,
        ingest_token=ids.ingest_token(),
        signing_secret=sealing.seal_endpoint_secret(ctx, endpoint_id, ids.signing_secret()),
        temporary=True,
        expires_at=now + TEMPORARY_LIFETIME,
    )
