"""Learned schemas (migration 0014): what the learn worker writes, and the account-scoped reads of /v1.

The learner's writes run inside the learn worker's transaction (under a savepoint), one statement per kind
for the whole step (ADR 0041). Schema rows are locked in id order, so two learners learning overlapping
schemas wait for each other instead of deadlocking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from control.db.connection import Connection

__all__ = (
    "MAX_SCHEMAS",
    "accounts_of",
    "create_missing",
    "for_endpoint",
    "get",
    "ids_for",
    "list_for_account",
    "lock",
    "siblings",
    "states",
    "states_for_account",
    "store",
    "version_fields",
    "versions",
    "write_versions",
)

MAX_SCHEMAS = 1000
"""Per account: schemas past it are not created (an event type per request would otherwise grow forever)."""

_COLUMNS = """s.id, s.provider, s.event_type, s.endpoint_id, s.current_version, s.sample_count,
              s.first_seen_at, s.last_seen_at"""


async def accounts_of(conn: Connection, endpoint_ids: list[str]) -> dict[str, str]:
    rows = await conn.fetch("SELECT id, account_id FROM endpoints WHERE id = any($1::text[])", endpoint_ids)
    return {r["id"]: r["account_id"] for r in rows}


async def create_missing(
    conn: Connection, keys: Sequence[tuple[str, str, str, str | None, str | None, str | None]]
) -> None:
    """``keys``: (new id, account id, scope key, provider, event type, endpoint id); existing ones stay, and
    an account at ``MAX_SCHEMAS`` gets no new one."""
    ordered = sorted(keys, key=lambda k: (k[1], k[2]))
    await conn.execute(
        f"""INSERT INTO schemas (id, account_id, scope_key, provider, event_type, endpoint_id)
            SELECT k.id, k.account_id, k.scope_key, k.provider, k.event_type, k.endpoint_id
              FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                   WITH ORDINALITY AS k(id, account_id, scope_key, provider, event_type, endpoint_id, n)
             WHERE (SELECT count(*) FROM schemas c WHERE c.account_id = k.account_id) < {MAX_SCHEMAS}
             ORDER BY k.n
            ON CONFLICT (account_id, scope_key) DO NOTHING""",
        *([k[i] for k in ordered] for i in range(6)),
    )


async def ids_for(conn: Connection, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(account id, scope key) → schema id."""
    rows = await conn.fetch(
        """SELECT s.id, s.account_id, s.scope_key FROM schemas s
             JOIN unnest($1::text[], $2::text[]) AS k(account_id, scope_key)
               ON s.account_id = k.account_id AND s.scope_key = k.scope_key""",
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return {(r["account_id"], r["scope_key"]): r["id"] for r in rows}


async def lock(conn: Connection, schema_ids: list[str]) -> dict[str, int]:
    """Locks the schemas (id order) for the rest of the transaction; id → revision."""
    rows = await conn.fetch(
        "SELECT id, revision FROM schemas WHERE id = any($1::text[]) ORDER BY id FOR UPDATE", schema_ids
    )
    return {r["id"]: r["revision"] for r in rows}


async def states(conn: Connection, schema_ids: list[str]) -> dict[str, bytes | None]:
    rows = await conn.fetch("SELECT id, state FROM schemas WHERE id = any($1::text[])", schema_ids)
    return {r["id"]: r["state"] for r in rows}


async def store(conn: Connection, updates: list[tuple[Any, ...]], endpoints: list[tuple[Any, ...]]) -> None:
    """``updates``: (id, state, revision, version, samples, first seen, last seen) per schema;
    ``endpoints``: (schema id, endpoint id, samples, first seen, last seen)."""
    await conn.execute(
        """UPDATE schemas s SET state = u.state, revision = u.revision, current_version = u.version,
                  sample_count = s.sample_count + u.samples,
                  first_seen_at = coalesce(s.first_seen_at, u.first_at), last_seen_at = u.last_at
             FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::int[], $5::bigint[], $6::timestamptz[],
                         $7::timestamptz[]) AS u(id, state, revision, version, samples, first_at, last_at)
            WHERE s.id = u.id""",
        *([u[i] for u in updates] for i in range(7)),
    )
    ordered = sorted(endpoints, key=lambda e: (e[0], e[1]))
    await conn.execute(
        """INSERT INTO schema_endpoints AS se (schema_id, endpoint_id, sample_count, first_seen_at, last_seen_at)
           SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::timestamptz[])
           ON CONFLICT (schema_id, endpoint_id) DO UPDATE
              SET sample_count = se.sample_count + excluded.sample_count, last_seen_at = excluded.last_seen_at""",
        *([e[i] for e in ordered] for i in range(5)),
    )


async def write_versions(conn: Connection, versions: list[tuple[str, int, int, str]]) -> None:
    """(schema id, version, first sample, fields JSON): a new version, or version 1 amended in warm-up."""
    await conn.execute(
        """INSERT INTO schema_versions (schema_id, version, first_sample, fields)
           SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[]::jsonb[])
           ON CONFLICT (schema_id, version) DO UPDATE SET fields = excluded.fields""",
        *([v[i] for v in versions] for i in range(4)),
    )


# --- reads for /v1 (account-scoped) ---------------------------------------------------------------


async def list_for_account(
    conn: Connection, account_id: str, provider: str | None, event_type: str | None
) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"""SELECT {_COLUMNS}, s.state FROM schemas s
             WHERE s.account_id = $1 AND s.current_version > 0
               AND ($2::text IS NULL OR s.provider = $2) AND ($3::text IS NULL OR s.event_type = $3)
             ORDER BY s.provider NULLS LAST, s.event_type NULLS LAST, s.id""",
        account_id,
        provider,
        event_type,
    )


async def get(conn: Connection, account_id: str, schema_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {_COLUMNS}, s.state FROM schemas s WHERE s.id = $1 AND s.account_id = $2 AND s.current_version > 0",
        schema_id,
        account_id,
    )


async def for_endpoint(conn: Connection, endpoint_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"""SELECT {_COLUMNS}, s.state FROM schemas s JOIN schema_endpoints se ON se.schema_id = s.id
             WHERE se.endpoint_id = $1 AND s.current_version > 0
             ORDER BY s.provider NULLS LAST, s.event_type NULLS LAST, s.id""",
        endpoint_id,
    )


async def versions(conn: Connection, schema_id: str) -> list[asyncpg.Record]:
    """Newest first."""
    return await conn.fetch(
        """SELECT version, created_at, first_sample, fields::text AS fields FROM schema_versions
            WHERE schema_id = $1 ORDER BY version DESC""",
        schema_id,
    )


async def version_fields(conn: Connection, schema_id: str, version: int) -> str | None:
    found: str | None = await conn.fetchval(
        "SELECT fields::text FROM schema_versions WHERE schema_id = $1 AND version = $2", schema_id, version
    )
    return found


async def siblings(conn: Connection, schema_id: str) -> list[asyncpg.Record]:
    """The schema and every other schema of its provider learned on one of its endpoints (the event types
    one handler receives), with their current fields."""
    return await conn.fetch(
        f"""SELECT DISTINCT {_COLUMNS}, s.state FROM schemas s
             WHERE s.current_version > 0 AND (s.id = $1 OR (
                   s.provider IS NOT NULL
               AND s.provider = (SELECT provider FROM schemas WHERE id = $1)
               AND s.account_id = (SELECT account_id FROM schemas WHERE id = $1)
               AND EXISTS (SELECT 1 FROM schema_endpoints a JOIN schema_endpoints b ON a.endpoint_id = b.endpoint_id
                            WHERE a.schema_id = $1 AND b.schema_id = s.id)))
             ORDER BY s.event_type NULLS FIRST, s.id""",
        schema_id,
    )


async def states_for_account(conn: Connection, account_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT id, provider, event_type, endpoint_id, state FROM schemas
            WHERE account_id = $1 AND current_version > 0 ORDER BY id""",
        account_id,
    )
