"""``POST /api/register``: a free permanent account and its ``hy_live_`` key, shown once.

With ``api_token`` (a temporary token from /api/start) the token's anonymous account itself becomes the
permanent one: same id, so its endpoints, events, deliveries, destinations and learned schemas stay where
they are and nothing is copied. Every endpoint of it that has not expired becomes permanent in the same
transaction (``temporary: false``, ``expires_at: null``), and the edge is told before the answer, so the
ingest URL never answers 410 after a 201. Expired ones are not revived: the sweep removes them.

E-mail addresses are compared case-insensitively (stored as given); an address already registered is 409
``email_taken``, a token whose account already registered is 409 ``already_registered``.
"""

from __future__ import annotations

import logging
import re

import asyncpg
from redis.exceptions import RedisError

from control.db import accounts as db_accounts
from control.db import endpoints as db_endpoints
from control.db.context import Context
from control.records.anonymous import Registered, RegisterRequest
from control.records.storable import check_text
from control.records.text import EMAIL, PATTERN_RULES, TEMPORARY_TOKEN
from control.service.accounts import hash_key, issue_key
from control.service.anonymous import require_open
from control.service.endpoints import _endpoint as endpoint_record
from control.support import edge_config
from shared import ids
from shared.errors import ConflictError, UnauthorizedError, ValidationError

__all__ = ("register",)

log = logging.getLogger("hookyard.control.registration")

_EMAIL = re.compile(EMAIL)
_TOKEN = re.compile(TEMPORARY_TOKEN)


def _email_taken(email: str) -> ConflictError:
    return ConflictError(f"email: {email!r} is already registered", code="email_taken")


async def register(ctx: Context, data: RegisterRequest) -> Registered:
    require_open(ctx)
    email = check_text(data.email, "email")
    if not (3 <= len(email) <= 254 and _EMAIL.fullmatch(email)):
        raise ValidationError(f"email: {PATTERN_RULES[EMAIL]}")
    token = data.api_token
    if token is not None and not _TOKEN.fullmatch(token):
        raise ValidationError(f"api_token: {PATTERN_RULES[TEMPORARY_TOKEN]}")
    account_id = ids.new_id("acct")
    async with ctx.pool.acquire() as conn:
        try:
            async with conn.transaction():
                await db_accounts.lock_email(conn, email)
                if token is not None:
                    account = await db_accounts.lock_temporary_key_account(conn, hash_key(token))
                    if account is None:
                        raise UnauthorizedError("api_token: unknown, revoked or expired temporary token")
                    if account.kind != "anonymous":
                        raise ConflictError(
                            "api_token: its account is already registered; use that account's hy_live_ key",
                            code="already_registered",
                        )
                    account_id = account.id
                if await db_accounts.email_taken(conn, email):
                    raise _email_taken(email)
                if token is None:
                    await db_accounts.insert_account(conn, account_id=account_id, email=email, kind="permanent")
                    claimed = []
                else:
                    await db_accounts.claim_account(conn, account_id, email)
                    claimed = await db_endpoints.make_permanent(conn, account_id)
                key = await issue_key(conn, account_id, kind="live")
        except asyncpg.UniqueViolationError as exc:  # the same address created meanwhile by `account create`
            if exc.constraint_name == "accounts_email_key":
                raise _email_taken(email) from None
            raise
        if claimed:
            try:
                await edge_config.sync(ctx, conn, [row["id"] for row in claimed])
            except (RedisError, OSError) as exc:
                # Committed, and the key exists only in this answer: losing it would be worse than an edge
                # that still holds the old expiry until the sweep's next rebuild (within its interval).
                log.warning("register: edge config of %d claimed endpoint(s) not updated (%s)", len(claimed), exc)
    return Registered(
        account_id=account_id, email=email, api_key=key, endpoints=[endpoint_record(ctx, row) for row in claimed]
    )
