"""Endpoints, and the per-endpoint rows the edge needs (auth config, allowlist)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple

import asyncpg

from control.db.assignments import assignments
from control.db.connection import Connection, returned

__all__ = (
    "Deleted",
    "count_for_account",
    "delete",
    "delete_expired",
    "edge_rows",
    "expired_with_ref",
    "get",
    "insert",
    "list_for_account",
    "make_permanent",
    "next_config_version",
    "session_endpoint",
    "set_signing_secret",
    "update",
)

_COLUMNS = (
    "id, account_id, name, environment, external_ref, ingest_token, temporary, expires_at, created_at, updated_at,"
    " expect_event_within_s, signature_failure_alert_threshold, body_retention_days, response"
)
_UPDATABLE = frozenset(
    {
        "name",
        "environment",
        "external_ref",
        "expect_event_within_s",
        "signature_failure_alert_threshold",
        "body_retention_days",
        "response",
    }
)
_LIVE = "(expires_at IS NULL OR expires_at > now())"
"""Not a temporary endpoint past its expiry: an expired one is gone for its account (410 on every route,
left out of lists and quotas) while its rows wait for the sweep (``control.workers.sweep.expired_endpoints``)."""


async def insert(
    conn: Connection,
    *,
    endpoint_id: str,
    account_id: str,
    name: str,
    environment: str,
    external_ref: str | None,
    ingest_token: str,
    signing_secret: str,
    temporary: bool = False,
    expires_at: datetime | None = None,
) -> asyncpg.Record:
    """Inserts the endpoint with its default auth config; raises UniqueViolationError on a taken external_ref."""
    row = await conn.fetchrow(
        f"""INSERT INTO endpoints (id, account_id, name, environment, external_ref, ingest_token, signing_secret,
                                   temporary, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            RETURNING {_COLUMNS}""",
        endpoint_id,
        account_id,
        name,
        environment,
        external_ref,
        ingest_token,
        signing_secret,
        temporary,
        expires_at,
    )
    await conn.execute("INSERT INTO auth_configs (endpoint_id) VALUES ($1)", endpoint_id)
    return returned(row)


async def count_for_account(conn: Connection, account_id: str) -> int:
    """The account's live endpoints (what its quota counts)."""
    found: int = await conn.fetchval(f"SELECT count(*) FROM endpoints WHERE account_id = $1 AND {_LIVE}", account_id)
    return found


async def list_for_account(
    conn: Connection, account_id: str, *, external_ref: str | None = None
) -> list[asyncpg.Record]:
    """The account's live endpoints, newest first (with ``external_ref``: the one that carries it, if live)."""
    if external_ref is not None:
        return await conn.fetch(
            f"SELECT {_COLUMNS} FROM endpoints WHERE account_id = $1 AND external_ref = $2 AND {_LIVE}",
            account_id,
            external_ref,
        )
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM endpoints WHERE account_id = $1 AND {_LIVE} ORDER BY created_at DESC, id DESC",
        account_id,
    )


async def get(conn: Connection, account_id: str, endpoint_id: str) -> asyncpg.Record | None:
    """The account's endpoint, expired or not; ``expired`` says which, by the database's clock (as lists
    and the sweep judge it)."""
    return await conn.fetchrow(
        f"SELECT {_COLUMNS}, NOT {_LIVE} AS expired FROM endpoints WHERE id = $1 AND account_id = $2",
        endpoint_id,
        account_id,
    )


async def expired_with_ref(conn: Connection, account_id: str, external_ref: str) -> str | None:
    """The id of the account's expired endpoint that still holds ``external_ref`` until the sweep."""
    found: str | None = await conn.fetchval(
        f"SELECT id FROM endpoints WHERE account_id = $1 AND external_ref = $2 AND NOT {_LIVE}",
        account_id,
        external_ref,
    )
    return found


async def update(
    conn: Connection, account_id: str, endpoint_id: str, changes: Mapping[str, object]
) -> asyncpg.Record | None:
    """Sets the given columns (``_UPDATABLE``) and bumps updated_at."""
    assigned = assignments(changes, _UPDATABLE, first=3)
    sets = f"{assigned.sql}, updated_at = now()" if assigned.sql else "updated_at = updated_at"
    if "expect_event_within_s" in changes:  # silence is counted from the setting, not from before it
        sets += ", expect_event_since = now()"
    return await conn.fetchrow(
        f"UPDATE endpoints SET {sets} WHERE id = $1 AND account_id = $2 RETURNING {_COLUMNS}",
        endpoint_id,
        account_id,
        *assigned.values,
    )


async def set_signing_secret(
    conn: Connection, account_id: str, endpoint_id: str, signing_secret: str
) -> asyncpg.Record | None:
    """Replaces the platform signing secret (rotation) and bumps updated_at; None for an unknown id."""
    return await conn.fetchrow(
        f"""UPDATE endpoints SET signing_secret = $3, updated_at = now()
             WHERE id = $1 AND account_id = $2 RETURNING {_COLUMNS}""",
        endpoint_id,
        account_id,
        signing_secret,
    )


class Deleted(NamedTuple):
    ingest_token: str
    tombstone_version: int
    """A config version above every version the endpoint ever had (taken once its row was deleted)."""


async def delete(conn: Connection, account_id: str, endpoint_id: str) -> Deleted | None:
    """Deletes the endpoint and, by cascade, its events, deliveries, rules...; None for an unknown id.

    The tombstone version is drawn in the same statement, after the row lock: every bump of this endpoint
    committed before it, so a config read at any time before the delete has a lower version.
    """
    row = await conn.fetchrow(
        """DELETE FROM endpoints WHERE id = $1 AND account_id = $2
           RETURNING ingest_token, nextval('hy_config_version') AS tombstone_version""",
        endpoint_id,
        account_id,
    )
    return None if row is None else Deleted(row["ingest_token"], row["tombstone_version"])


async def delete_expired(
    conn: Connection, *, limit: int, grace_s: float = 0.0, endpoint_ids: list[str] | None = None
) -> list[Deleted]:
    """Deletes up to ``limit`` temporary endpoints whose ``expires_at`` passed more than ``grace_s`` ago
    (of ``endpoint_ids`` when given), with their events, deliveries and everything else by cascade; learned
    schemas stay with the account (only their ``schema_endpoints`` links go). Rows another transaction
    holds (a registration that is claiming them) are skipped; the outer condition is checked again once
    locked, so an endpoint that a registration made permanent in between is kept. Each comes back with a
    tombstone version, as from :func:`delete`."""
    only = "AND id = any($3::text[])" if endpoint_ids is not None else ""
    rows = await conn.fetch(
        f"""DELETE FROM endpoints
             WHERE id IN (SELECT id FROM endpoints
                           WHERE temporary AND expires_at <= now() - make_interval(secs => $2) {only}
                           ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
               AND temporary AND expires_at <= now() - make_interval(secs => $2)
         RETURNING ingest_token, nextval('hy_config_version') AS tombstone_version""",
        limit,
        grace_s,
        *([endpoint_ids] if endpoint_ids is not None else []),
    )
    return [Deleted(row["ingest_token"], row["tombstone_version"]) for row in rows]


async def session_endpoint(conn: Connection, account_id: str, ref: str | None) -> asyncpg.Record | None:
    """The account's newest endpoint with this ``external_ref`` (``None``: the newest without one), expired
    or not: what /api/start hands back to a session that asks again."""
    if ref is None:
        return await conn.fetchrow(
            f"""SELECT {_COLUMNS} FROM endpoints WHERE account_id = $1 AND external_ref IS NULL
                 ORDER BY created_at DESC, id DESC LIMIT 1""",
            account_id,
        )
    return await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM endpoints WHERE account_id = $1 AND external_ref = $2", account_id, ref
    )


async def make_permanent(conn: Connection, account_id: str) -> list[asyncpg.Record]:
    """The account's temporary endpoints that have not expired become permanent (``expires_at`` null; the
    trigger of migration 0005 bumps their config versions). Expired ones are left to the sweep."""
    return await conn.fetch(
        f"""UPDATE endpoints SET temporary = false, expires_at = NULL, updated_at = now()
             WHERE account_id = $1 AND temporary AND (expires_at IS NULL OR expires_at > now())
         RETURNING {_COLUMNS}""",
        account_id,
    )


async def next_config_version(conn: Connection) -> int:
    """A version above every config version committed so far (tombstones of endpoints found gone)."""
    found: int = await conn.fetchval("SELECT nextval('hy_config_version')")
    return found


_EDGE_SELECT = """
    SELECT e.id, e.account_id, e.environment, e.ingest_token, e.expires_at, e.signing_secret, e.config_version,
           e.response,
           a.hmac_enabled, a.secret, a.header_name, a.tolerance_seconds, a.on_failure, a.log_blocked_ips,
           a.provider, a.verify_token,
           coalesce((SELECT array_agg(host(l.cidr) || '/' || masklen(l.cidr) ORDER BY l.created_at)
                       FROM allowlist_entries l WHERE l.endpoint_id = e.id), '{}') AS allowlist
      FROM endpoints e JOIN auth_configs a ON a.endpoint_id = e.id
"""


async def edge_rows(conn: Connection, endpoint_ids: list[str] | None = None) -> list[asyncpg.Record]:
    """What the edge needs to serve each endpoint, with its ``config_version`` (all endpoints when
    ``endpoint_ids`` is None)."""
    if endpoint_ids is None:
        return await conn.fetch(_EDGE_SELECT)
    return await conn.fetch(_EDGE_SELECT + " WHERE e.id = any($1::text[])", endpoint_ids)
