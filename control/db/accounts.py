"""Accounts, API keys and the browser sessions of anonymous accounts."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from control.db.connection import Connection

__all__ = (
    "AccountKind",
    "account_id_by_email",
    "claim_account",
    "delete_empty_anonymous",
    "email_taken",
    "find_key",
    "insert_account",
    "insert_key",
    "insert_session",
    "lock_account",
    "lock_email",
    "lock_temporary_key_account",
    "revoke_surplus_temporary_keys",
    "session_account",
)


class AccountKind(msgspec.Struct, kw_only=True, frozen=True):
    """An account found by a credential (a session, a temporary token): its id and ``kind`` (``anonymous``,
    ``temporary``, ``permanent``), which decides what the credential may still do."""

    id: str
    kind: str


def _account_kind(row: asyncpg.Record | None) -> AccountKind | None:
    return None if row is None else AccountKind(id=row["id"], kind=row["kind"])


async def insert_account(
    conn: Connection, *, account_id: str, email: str | None, kind: str, endpoint_quota: int | None = None
) -> None:
    await conn.execute(
        "INSERT INTO accounts (id, email, kind, endpoint_quota) VALUES ($1, $2, $3, $4)",
        account_id,
        email,
        kind,
        endpoint_quota,
    )


async def insert_key(
    conn: Connection,
    *,
    key_id: str,
    account_id: str,
    key_hash: bytes,
    display: str,
    kind: str,
    read_only: bool = False,
    expires_at: datetime | None = None,
) -> None:
    await conn.execute(
        """INSERT INTO api_keys (id, account_id, key_hash, display, kind, read_only, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        key_id,
        account_id,
        key_hash,
        display,
        kind,
        read_only,
        expires_at,
    )


async def find_key(conn: Connection, key_hash: bytes) -> asyncpg.Record | None:
    """The usable (neither revoked nor expired) key with this hash and its account."""
    return await conn.fetchrow(
        """SELECT k.id, k.account_id, k.kind, k.read_only
             FROM api_keys k
            WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())""",
        key_hash,
    )


async def account_kind(conn: Connection, account_id: str) -> str | None:
    """``anonymous`` (made by /api/start), ``permanent`` (registered or created), None when there is none."""
    found: str | None = await conn.fetchval("SELECT kind FROM accounts WHERE id = $1", account_id)
    return found


async def lock_account(conn: Connection, account_id: str) -> asyncpg.Record | None:
    """Row-locks the account for the transaction, serialising quota checks of concurrent creates."""
    return await conn.fetchrow("SELECT id, endpoint_quota FROM accounts WHERE id = $1 FOR UPDATE", account_id)


async def account_id_by_email(conn: Connection, email: str) -> str | None:
    found: str | None = await conn.fetchval("SELECT id FROM accounts WHERE email = $1", email)
    return found


# -- anonymous accounts and registration ---------------------------------------------------------------


async def insert_session(conn: Connection, session_hash: bytes, account_id: str) -> None:
    await conn.execute(
        "INSERT INTO anonymous_sessions (session_hash, account_id) VALUES ($1, $2)", session_hash, account_id
    )


async def session_account(conn: Connection, session_hash: bytes, *, lock: bool) -> AccountKind | None:
    """The account of a browser session. With ``lock``, the account row is locked for the transaction: a
    concurrent /api/start of the same session, a registration and the sweep's removal of an empty account
    then happen one after the other."""
    row = await conn.fetchrow(
        f"""SELECT a.id, a.kind FROM anonymous_sessions s JOIN accounts a ON a.id = s.account_id
             WHERE s.session_hash = $1 {"FOR UPDATE OF a" if lock else ""}""",
        session_hash,
    )
    return _account_kind(row)


async def lock_temporary_key_account(conn: Connection, key_hash: bytes) -> AccountKind | None:
    """The account of a usable temporary token, locked for the transaction."""
    row = await conn.fetchrow(
        """SELECT a.id, a.kind FROM api_keys k JOIN accounts a ON a.id = k.account_id
            WHERE k.key_hash = $1 AND k.kind = 'temporary' AND k.revoked_at IS NULL
              AND (k.expires_at IS NULL OR k.expires_at > now())
              FOR UPDATE OF a""",
        key_hash,
    )
    return _account_kind(row)


async def lock_email(conn: Connection, email: str) -> None:
    """Serialises registrations of one address in any letter case until the transaction ends: the unique
    constraint on ``accounts.email`` compares exactly, registration compares case-insensitively."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(lower($1), 7307))", email)


async def email_taken(conn: Connection, email: str) -> bool:
    found: bool = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM accounts WHERE lower(email) = lower($1))", email)
    return found


async def claim_account(conn: Connection, account_id: str, email: str) -> None:
    """An anonymous account becomes a permanent one, keeping its id and everything it owns."""
    await conn.execute(
        "UPDATE accounts SET kind = 'permanent', email = $2, claimed_at = now() WHERE id = $1",
        account_id,
        email,
    )


async def revoke_surplus_temporary_keys(conn: Connection, account_id: str, *, keep: int) -> int:
    """Revokes the account's usable temporary tokens beyond the ``keep`` newest (ids are time-ordered)."""
    status = await conn.execute(
        """UPDATE api_keys SET revoked_at = now()
            WHERE id IN (SELECT id FROM api_keys
                          WHERE account_id = $1 AND kind = 'temporary' AND revoked_at IS NULL
                          ORDER BY id DESC OFFSET $2)""",
        account_id,
        keep,
    )
    return int(status.split()[-1])


async def delete_empty_anonymous(conn: Connection, *, limit: int) -> int:
    """Deletes up to ``limit`` anonymous accounts that own no endpoint, with their sessions, tokens and
    learned schemas (by cascade). Two statements in one transaction: the first locks the candidates (skipping
    any a request holds), the second deletes those still empty as seen after the locks were granted, so an
    endpoint that /api/start committed meanwhile keeps its account. Returns how many went."""
    async with conn.transaction():
        ids = await conn.fetchval(
            """SELECT coalesce(array_agg(id), '{}') FROM (
                   SELECT a.id FROM accounts a
                    WHERE a.kind = 'anonymous'
                      AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.account_id = a.id)
                    LIMIT $1 FOR UPDATE OF a SKIP LOCKED) candidates""",
            limit,
        )
        if not ids:
            return 0
        status = await conn.execute(
            """DELETE FROM accounts a
                WHERE a.id = any($1::text[]) AND a.kind = 'anonymous'
                  AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.account_id = a.id)""",
            ids,
        )
    return int(status.split()[-1])
