"""Destinations: the outbound URLs of an endpoint.

Reads and writes by destination id are scoped by account (through the endpoint) here; functions taking an
endpoint id expect one already known to be the caller's (``require_endpoint`` / ``rules.lock_routing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import asyncpg

from control.db.assignments import assignments
from control.db.connection import Connection, returned

__all__ = (
    "auth_material",
    "clear_transform_crash",
    "count_for_endpoint",
    "delete",
    "existing_ids",
    "for_update",
    "get",
    "insert",
    "list_for_endpoint",
    "lock",
    "mark_transform_crash",
    "mark_transform_slowed",
    "rotate_secret",
    "signing_for_rotation",
    "transform_source",
    "update",
)

_SHAPING = ("rate_limit_per_s", "ordering", "ordering_key", "deduplicate_window_s")
"""How deliveries to the destination are shaped (migration 0020)."""
_AUTH = ("auth_type", "auth_shown", "auth_sealed", "tls_ca", "auth_version")
"""How deliveries authenticate to the destination (migration 0031; written by ``control.service.destinations.auth``)."""
_SHOWN = ("auth_shown", "tls_ca", "signing_public_key", "state", "disabled_reason", "disabled_at")
"""What reads show of authentication, signing and state (migration 0031)."""
_SLOWED = ("transform_slowed_at", "transform_slowed_s")
"""A transform the worker's sandbox pool slows after repeated stops by its limits (migration 0041)."""
_OVERLAP = ("previous_secret_expires_at", "previous_public_key")
"""A rotation's previous key and the end of its overlap: shown only while the overlap lasts."""


def _columns(alias: str) -> str:
    a = alias
    plain = ["id", "endpoint_id", "name", "url", "headers", "sign_deliveries", "propagate_trace", *_SHAPING]
    plain += ["created_at", "updated_at", "transform", "transform_crashed_at", "transform_crash", *_SLOWED, *_SHOWN]
    overlap = [f"CASE WHEN {a}previous_secret_expires_at > now() THEN {a}{c} END AS {c}" for c in _OVERLAP]
    return ", ".join([f"{a}{c}" for c in plain] + overlap)


_COLUMNS = _columns("d.")
_RETURNING = _columns("")
_UPDATABLE = frozenset({"url", "name", "headers", "sign_deliveries", "propagate_trace", "transform", *_SHAPING, *_AUTH})


async def insert(
    conn: Connection,
    *,
    destination_id: str,
    endpoint_id: str,
    name: str | None,
    url: str,
    headers: Mapping[str, str] | None,
    signing_secret: str,
    sign_deliveries: bool = True,
    shaping: Mapping[str, object] | None = None,
    transform: str | None = None,
    propagate_trace: bool = True,
    auth: Mapping[str, object] | None = None,
    signing_public_key: str | None = None,
) -> asyncpg.Record:
    """The new row (``_RETURNING``); the signing secret is written, never read back here. ``shaping``: values
    of ``rate_limit_per_s``, ``ordering``, ``ordering_key`` and ``deduplicate_window_s`` (the defaults when
    left out); ``auth``: the authentication columns (``_AUTH``, none when left out)."""
    shaping, auth = shaping or {}, auth or {}
    return returned(
        await conn.fetchrow(
            f"""INSERT INTO destinations (id, endpoint_id, name, url, headers, signing_secret, sign_deliveries,
                                      {", ".join(_SHAPING)}, transform, propagate_trace, {", ".join(_AUTH)},
                                      signing_public_key)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, 'none'), $10, $11, $12, $13, $14, $15, $16, $17,
                    $18, $19)
            RETURNING {_RETURNING}""",
            destination_id,
            endpoint_id,
            name,
            url,
            headers,
            signing_secret,
            sign_deliveries,
            *(shaping.get(c) for c in _SHAPING),
            transform,
            propagate_trace,
            *(auth.get(c) for c in _AUTH),
            signing_public_key,
        )
    )


async def transform_source(conn: Connection, destination_id: str) -> asyncpg.Record | None:
    """The destination's transform, its digest (``transform_digest``) and its account (whose share of the
    sandbox it runs in), for a deliver worker that has not loaded this version yet; None when the
    destination is gone."""
    return await conn.fetchrow(
        """SELECT d.transform, d.transform_digest, p.account_id
             FROM destinations d JOIN endpoints p ON p.id = d.endpoint_id
            WHERE d.id = $1""",
        destination_id,
    )


async def mark_transform_crash(conn: Connection, destination_id: str, digest: str, error: str) -> None:
    """The destination's transform (this version: ``digest``) ended its sandbox process."""
    await conn.execute(
        """UPDATE destinations SET transform_crashed_at = now(), transform_crash = $3
            WHERE id = $1 AND transform_digest = $2""",
        destination_id,
        digest,
        error,
    )


async def mark_transform_slowed(conn: Connection, destination_id: str, digest: str, wait_s: float) -> None:
    """The pool now waits ``wait_s`` before each call of the destination's transform (this version:
    ``digest``), since the first such wait; 0: it no longer does, and the mark goes."""
    if wait_s:
        await conn.execute(
            """UPDATE destinations SET transform_slowed_at = coalesce(transform_slowed_at, now()),
                                       transform_slowed_s = $3
                WHERE id = $1 AND transform_digest = $2""",
            destination_id,
            digest,
            wait_s,
        )
    else:
        await conn.execute(
            """UPDATE destinations SET transform_slowed_at = NULL, transform_slowed_s = NULL
                WHERE id = $1 AND transform_digest = $2 AND transform_slowed_at IS NOT NULL""",
            destination_id,
            digest,
        )


async def clear_transform_crash(conn: Connection, destination_id: str) -> None:
    """A retry asks for the transform to run again."""
    await conn.execute(
        """UPDATE destinations SET transform_crashed_at = NULL, transform_crash = NULL
            WHERE id = $1 AND transform_crashed_at IS NOT NULL""",
        destination_id,
    )


async def list_for_endpoint(conn: Connection, endpoint_id: str) -> list[asyncpg.Record]:
    """Oldest first."""
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM destinations d WHERE d.endpoint_id = $1 ORDER BY d.created_at, d.id", endpoint_id
    )


async def count_for_endpoint(conn: Connection, endpoint_id: str) -> int:
    found: int = await conn.fetchval("SELECT count(*) FROM destinations WHERE endpoint_id = $1", endpoint_id)
    return found


async def existing_ids(conn: Connection, endpoint_id: str, destination_ids: Iterable[str]) -> set[str]:
    """Those of ``destination_ids`` that are destinations of this endpoint."""
    rows = await conn.fetch(
        "SELECT id FROM destinations WHERE endpoint_id = $1 AND id = any($2::text[])",
        endpoint_id,
        list(destination_ids),
    )
    return {r["id"] for r in rows}


async def get(conn: Connection, account_id: str, destination_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
             WHERE d.id = $1 AND e.account_id = $2""",
        destination_id,
        account_id,
    )


async def signing_for_rotation(conn: Connection, account_id: str, destination_id: str) -> asyncpg.Record | None:
    """The destination's current signing secret (sealed) and endpoint, locked until the caller's transaction
    ends, so two rotations at once keep each other's secret as previous in turn, never lose one."""
    return await conn.fetchrow(
        """SELECT d.endpoint_id, d.signing_secret, d.signing_public_key
             FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
            WHERE d.id = $1 AND e.account_id = $2
              FOR NO KEY UPDATE OF d""",
        destination_id,
        account_id,
    )


async def rotate_secret(
    conn: Connection,
    destination_id: str,
    *,
    signing_secret: str,
    signing_public_key: str | None,
    previous_secret: str | None,
    previous_public_key: str | None,
    overlap_s: float,
) -> asyncpg.Record:
    """Replaces the signing secret (after ``signing_for_rotation``); the replaced one (sealed for its own
    column) is kept for ``overlap_s`` seconds, or dropped at once with 0. The destination's row."""
    return returned(
        await conn.fetchrow(
            f"""UPDATE destinations d
               SET signing_secret = $2, signing_public_key = $3, updated_at = now(),
                   previous_signing_secret = CASE WHEN $6 > 0 THEN $4 END,
                   previous_public_key = CASE WHEN $6 > 0 THEN $5 END,
                   previous_secret_expires_at = CASE WHEN $6 > 0 THEN now() + make_interval(secs => $6) END
             WHERE d.id = $1
         RETURNING {_COLUMNS}""",
            destination_id,
            signing_secret,
            signing_public_key,
            previous_secret,
            previous_public_key,
            float(overlap_s),
        )
    )


async def auth_material(conn: Connection, destination_id: str) -> asyncpg.Record | None:
    """The sealed authentication, the CA bundle and their version, for a deliver worker or a replay."""
    return await conn.fetchrow(
        "SELECT auth_sealed, tls_ca, auth_version FROM destinations WHERE id = $1", destination_id
    )


async def for_update(conn: Connection, account_id: str, destination_id: str) -> asyncpg.Record | None:
    """The fields a PATCH checks together (url, auth type, CA), locked until the caller's transaction ends."""
    return await conn.fetchrow(
        """SELECT d.url, d.auth_type, d.tls_ca FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
            WHERE d.id = $1 AND e.account_id = $2
              FOR NO KEY UPDATE OF d""",
        destination_id,
        account_id,
    )


async def lock(conn: Connection, account_id: str, destination_id: str) -> str | None:
    """Locks the destination's endpoint for routing changes (``rules.lock_routing``) and returns its id;
    None for an unknown destination, one of another account, or one deleted while this waited."""
    endpoint_id = await conn.fetchval(
        """SELECT d.endpoint_id FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
            WHERE d.id = $1 AND e.account_id = $2""",
        destination_id,
        account_id,
    )
    if endpoint_id is None:
        return None
    locked = await conn.fetchval(
        "SELECT true FROM endpoints WHERE id = $1 AND account_id = $2 FOR NO KEY UPDATE", endpoint_id, account_id
    )
    # A new statement (READ COMMITTED) sees a delete that committed while the lock was awaited.
    if not locked or not await conn.fetchval("SELECT true FROM destinations WHERE id = $1", destination_id):
        return None
    found: str | None = endpoint_id
    return found


async def update(
    conn: Connection, account_id: str, destination_id: str, changes: Mapping[str, object]
) -> asyncpg.Record | None:
    """Sets the given columns (url, name, headers, sign_deliveries, transform and the shaping ones) and bumps
    updated_at when there are any."""
    assigned = assignments(changes, _UPDATABLE, first=3)
    if not changes:
        return await get(conn, account_id, destination_id)
    sets = assigned.sql
    if "transform" in changes:  # new code runs again, and at once, whatever the old one did to its process
        sets += ", transform_crashed_at = NULL, transform_crash = NULL"
        sets += ", transform_slowed_at = NULL, transform_slowed_s = NULL"
    return await conn.fetchrow(
        f"""UPDATE destinations d SET {sets}, updated_at = now()
              FROM endpoints e
             WHERE d.id = $1 AND e.id = d.endpoint_id AND e.account_id = $2
         RETURNING {_COLUMNS}""",
        destination_id,
        account_id,
        *assigned.values,
    )


async def delete(conn: Connection, destination_id: str) -> list[str]:
    """Deletes the destination (its rule links and pending delivery tasks cascade) together with the rules
    that forwarded to it alone; the other rules that forwarded to it get a new ``updated_at``.

    Run it in a transaction, after ``lock``. Returns the ids of the deleted rules.
    """
    orphans = await conn.fetch(
        """DELETE FROM rules r
            WHERE r.id IN (SELECT rd.rule_id FROM rule_destinations rd WHERE rd.destination_id = $1)
              AND NOT EXISTS (SELECT 1 FROM rule_destinations o WHERE o.rule_id = r.id AND o.destination_id <> $1)
        RETURNING r.id""",
        destination_id,
    )
    await conn.execute(
        """UPDATE rules SET updated_at = now()
            WHERE id IN (SELECT rule_id FROM rule_destinations WHERE destination_id = $1)""",
        destination_id,
    )
    await conn.execute("DELETE FROM destinations WHERE id = $1", destination_id)
    return sorted(r["id"] for r in orphans)
