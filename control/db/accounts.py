"""Accounts and API keys."""

from __future__ import annotations

import asyncpg

__all__ = ("account_id_by_email", "find_key", "insert_account", "insert_key", "lock_account")


async def insert_account(
    conn: asyncpg.Connection, *, account_id: str, email: str | None, kind: str, endpoint_quota: int | None = None
) -> None:
    await conn.execute(
        "INSERT INTO accounts (id, email, kind, endpoint_quota) VALUES ($1, $2, $3, $4)",
        account_id,
        email,
        kind,
        endpoint_quota,
    )


async def insert_key(
    conn: asyncpg.Connection,
    *,
    key_id: str,
    account_id: str,
    key_hash: bytes,
    display: str,
    kind: str,
    read_only: bool = False,
) -> None:
    await conn.execute(
        "INSERT INTO api_keys (id, account_id, key_hash, display, kind, read_only) VALUES ($1, $2, $3, $4, $5, $6)",
        key_id,
        account_id,
        key_hash,
        display,
        kind,
        read_only,
    )


async def find_key(conn: asyncpg.Connection, key_hash: bytes) -> asyncpg.Record | None:
    """The live (not revoked) key with this hash and its account."""
    return await conn.fetchrow(
        """SELECT k.id, k.account_id, k.kind, k.read_only
             FROM api_keys k
            WHERE k.key_hash = $1 AND k.revoked_at IS NULL""",
        key_hash,
    )


async def lock_account(conn: asyncpg.Connection, account_id: str) -> asyncpg.Record | None:
    """Row-locks the account for the transaction, serialising quota checks of concurrent creates."""
    return await conn.fetchrow("SELECT id, endpoint_quota FROM accounts WHERE id = $1 FOR UPDATE", account_id)


async def account_id_by_email(conn: asyncpg.Connection, email: str) -> str | None:
    return await conn.fetchval("SELECT id FROM accounts WHERE email = $1", email)
