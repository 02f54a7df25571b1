"""Accounts and API keys: creation, and turning a presented key into a Principal."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from control.db import accounts as db_accounts
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records.storable import check_text
from shared import ids
from shared.errors import ForbiddenError, UnauthorizedError

__all__ = (
    "TEMPORARY_LIFETIME",
    "authenticate",
    "create_account",
    "hash_key",
    "issue_key",
    "require_live_key",
    "temporary_advice",
)

_KEY_PREFIXES = ("hy_live_", "hy_tmp_")

TEMPORARY_LIFETIME = timedelta(days=3)
"""A temporary endpoint lasts 3 days (docs/reference/agents.md); so does each temporary token, from when it was
issued."""


def hash_key(key: str) -> bytes:
    """Keys are stored as SHA-256: they are long random strings, so a slow KDF would buy nothing."""
    return hashlib.sha256(key.encode()).digest()


async def issue_key(conn: Connection, account_id: str, *, kind: str = "live", read_only: bool = False) -> str:
    """A live key never expires; a temporary token (``hy_tmp_``) stops working ``TEMPORARY_LIFETIME`` after
    it was issued, even once its account registered: it travels through browsers and agent configurations,
    and the registered account has a live key."""
    key = ids.api_key() if kind == "live" else ids.temporary_token()
    await db_accounts.insert_key(
        conn,
        key_id=ids.new_id("key"),
        account_id=account_id,
        key_hash=hash_key(key),
        display=key[: key.index("_", 3) + 5] + "…",
        kind=kind,
        read_only=read_only,
        expires_at=None if kind == "live" else datetime.now(UTC) + TEMPORARY_LIFETIME,
    )
    return key


async def require_live_key(ctx: Context, principal: Principal, what: str) -> None:
    """403 ``temporary_token`` for what a temporary token may not do wherever it is accepted (the MCP server):
    its account owns exactly the endpoints /api/start made for it, and nothing more is made through it."""
    if principal.kind == "temporary":
        raise await _temporary_refused(ctx, principal, f"a temporary token from /api/start cannot {what}")


async def _temporary_refused(ctx: Context, principal: Principal, refused: str) -> ForbiddenError:
    return ForbiddenError(f"{refused}; {await temporary_advice(ctx, principal)}", code="temporary_token")


async def temporary_advice(ctx: Context, principal: Principal) -> str:
    """What a temporary token's holder does instead, which depends on the token's account: register it, or,
    once it is registered (a token stays valid for its 3 days), use the key that registering answered;
    "register" would get 409."""
    async with ctx.pool.acquire() as conn:
        registered = await db_accounts.account_kind(conn, principal.account_id) == "permanent"
    if registered:
        advice = (
            "its account is registered now: use the account's hy_live_ key (the api_key that POST /api/register "
            "answered)"
        )
    else:
        advice = "register an account (POST /api/register) and use its hy_live_ key"
    return advice


async def create_account(
    conn: Connection,
    *,
    email: str | None,
    kind: str = "permanent",
    endpoint_quota: int | None = None,
    read_only: bool = False,
) -> tuple[str, str]:
    """Creates an account with one key; returns (account_id, key). Keys are shown once, never stored.

    ``email`` may come from argv, where bytes that are not UTF-8 arrive as lone surrogates."""
    check_text(email, "email")
    account_id = ids.new_id("acct")
    async with conn.transaction():
        await db_accounts.insert_account(
            conn, account_id=account_id, email=email, kind=kind, endpoint_quota=endpoint_quota
        )
        key_kind = "live" if kind == "permanent" else "temporary"
        key = await issue_key(conn, account_id, kind=key_kind, read_only=read_only)
    return account_id, key


async def authenticate(ctx: Context, authorization: str | None, *, allow_temporary: bool) -> Principal:
    """Resolves ``Authorization: Bearer <key>``; 401 for anything missing or unknown.

    A temporary (``hy_tmp_``) token is a valid credential but only for /mcp and the inbox: on /v1 it gets
    403 ``temporary_token`` so the caller learns to register rather than to retry.
    """
    if not authorization:
        raise UnauthorizedError("Authorization header is missing; send `Authorization: Bearer <API key>`")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise UnauthorizedError("Authorization header must be `Bearer <API key>`")
    if not token.startswith(_KEY_PREFIXES):
        raise UnauthorizedError("API key is malformed: it must start with hy_live_")
    async with ctx.pool.acquire() as conn:
        row = await db_accounts.find_key(conn, hash_key(token))
    if row is None:
        raise UnauthorizedError("API key is invalid, revoked or expired")
    principal = Principal(account_id=row["account_id"], key_id=row["id"], kind=row["kind"], read_only=row["read_only"])
    if principal.kind == "temporary" and not allow_temporary:
        raise await _temporary_refused(ctx, principal, "temporary tokens from /api/start have no /v1 access")
    return principal
