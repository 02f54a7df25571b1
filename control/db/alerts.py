"""Alerts, their sends (an outbox, one row per alert and alert destination) and the sends' attempts.

Firing is an insert that the partial unique index ``alerts_open`` lets through once per open condition; the
sends are made in the same transaction for every alert destination of the account that takes the type.
A send is leased (``claim``) with FOR UPDATE SKIP LOCKED, so two workers never take the same one, and its
result is written only while the lease is still the claimer's (``finish`` compares ``attempts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from control.db.connection import Connection

__all__ = (
    "claim",
    "destination_names",
    "finish",
    "fire",
    "list_for_account",
    "open_alerts",
    "open_for_endpoint",
    "prune",
    "resolve",
    "resolve_condition",
    "sends_of",
    "set_counts",
)

_ALERT_COLUMNS = "id, account_id, type, condition_key, endpoint_id, destination_id, data, count, fired_at, resolved_at"


async def open_alerts(conn: Connection, types: Sequence[str]) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE resolved_at IS NULL AND type = ANY($1::text[])", list(types)
    )


async def fire(
    conn: Connection,
    *,
    alert_id: str,
    account_id: str,
    type: str,
    condition_key: str,
    endpoint_id: str | None,
    destination_id: str | None,
    count: int,
    data: dict[str, object],
    resolved: bool = False,
) -> bool:
    """Inserts the alert unless one of its condition is open, and its sends; True when it fired. A
    ``resolved`` alert (``destination.recovered``) is a notice: it is closed as it fires."""
    fired = await conn.fetchval(
        """INSERT INTO alerts (id, account_id, type, condition_key, endpoint_id, destination_id, count, data,
                               resolved_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $9 THEN now() END)
           ON CONFLICT (account_id, type, condition_key) WHERE resolved_at IS NULL DO NOTHING
           RETURNING true""",
        alert_id,
        account_id,
        type,
        condition_key,
        endpoint_id,
        destination_id,
        count,
        data,
        resolved,
    )
    if not fired:
        return False
    await conn.execute(
        """INSERT INTO alert_sends (id, alert_id, alert_destination_id, url, format)
           SELECT $1 || '.' || ad.id, $1, ad.id, ad.url, ad.format
             FROM alert_destinations ad
            WHERE ad.account_id = $2 AND $3 = ANY(ad.events)""",
        alert_id,
        account_id,
        type,
    )
    return True


async def set_counts(conn: Connection, current: Sequence[tuple[str, int, dict[str, object]]]) -> None:
    """Keeps open alerts current: their running ``count`` (an hour's exhausted events, the window's failures, a
    circuit's consecutive failures) and the ``data`` read with it, so the figure ``data`` repeats
    (``consecutive_failures``, ``dead_letters``) is never an older one than ``count``."""
    if current:
        await conn.execute(
            """UPDATE alerts a SET count = u.count, data = u.data
                 FROM unnest($1::text[], $2::bigint[], $3::jsonb[]) AS u(id, count, data)
                WHERE a.id = u.id AND (a.count <> u.count OR a.data <> u.data)""",
            [c[0] for c in current],
            [c[1] for c in current],
            [c[2] for c in current],
        )


async def resolve(conn: Connection, alert_ids: Sequence[str]) -> None:
    if alert_ids:
        await conn.execute(
            "UPDATE alerts SET resolved_at = now() WHERE id = ANY($1::text[]) AND resolved_at IS NULL",
            list(alert_ids),
        )


async def resolve_condition(conn: Connection, type_: str, condition_key: str) -> list[str]:
    """Resolves the open alert of one condition (the ids resolved: none or one)."""
    rows = await conn.fetch(
        """UPDATE alerts SET resolved_at = now()
            WHERE type = $1 AND condition_key = $2 AND resolved_at IS NULL
        RETURNING id""",
        type_,
        condition_key,
    )
    return [r["id"] for r in rows]


_DUE = (
    "(({s}status = 'pending' AND {s}next_attempt_at <= now())"
    " OR ({s}status = 'in_flight' AND {s}lease_expires_at < now()))"
)
"""A send that may be leased: pending and due, or in flight past its lease (``{s}``: the table's alias)."""


_CLAIM = f"""WITH busy AS (
               SELECT s.alert_destination_id, a.account_id
                 FROM alert_sends s JOIN alerts a ON a.id = s.alert_id
                WHERE s.status = 'in_flight' AND s.lease_expires_at >= now()),
           busy_destination AS (SELECT alert_destination_id AS id, count(*) AS n FROM busy GROUP BY 1),
           busy_account AS (SELECT account_id AS id, count(*) AS n FROM busy GROUP BY 1),
           due AS (
               SELECT s.id, s.alert_destination_id, a.account_id, s.next_attempt_at,
                      row_number() OVER (PARTITION BY s.alert_destination_id ORDER BY s.next_attempt_at, s.id) AS k
                 FROM alert_sends s JOIN alerts a ON a.id = s.alert_id
                WHERE {_DUE.format(s="s.")}),
           open_destination AS (
               SELECT d.*, row_number() OVER (PARTITION BY d.account_id ORDER BY d.k, d.next_attempt_at, d.id) AS ka
                 FROM due d LEFT JOIN busy_destination b ON b.id = d.alert_destination_id
                WHERE d.k + coalesce(b.n, 0) <= $3),
           picked AS (
               SELECT o.id FROM open_destination o LEFT JOIN busy_account b ON b.id = o.account_id
                WHERE o.ka + coalesce(b.n, 0) <= $4
                ORDER BY o.ka, o.next_attempt_at, o.id LIMIT $1),
           locked AS (
               SELECT id FROM alert_sends WHERE id IN (SELECT id FROM picked) AND {_DUE.format(s="")}
                  FOR UPDATE SKIP LOCKED),
           leased AS (
               UPDATE alert_sends s SET status = 'in_flight', attempts = s.attempts + 1,
                      lease_expires_at = now() + make_interval(secs => $2)
                 FROM locked WHERE s.id = locked.id
             RETURNING s.*)
           SELECT l.id, l.alert_id, l.alert_destination_id, l.url, l.format, l.attempts,
                  a.type, a.account_id, a.endpoint_id, a.destination_id, a.count, a.data, a.fired_at, a.resolved_at,
                  ad.signing_secret
             FROM leased l JOIN alerts a ON a.id = l.alert_id
             LEFT JOIN alert_destinations ad ON ad.id = l.alert_destination_id"""


async def claim(
    conn: Connection, *, limit: int, lease_s: float, per_destination: int, per_account: int
) -> list[asyncpg.Record]:
    """Leases up to ``limit`` due sends (pending, or in flight with an expired lease: its worker died),
    with what sending needs: the alert, and the destination's stored secret (null: deleted meanwhile).

    The lock step says again what due is (``_DUE``): the candidates come from this statement's snapshot, and
    a send another worker leased and committed since is locked in its new version, on which Postgres checks
    only the lock step's own condition. With ``id IN (picked)`` alone, that leased send was leased again and
    sent twice (four racing workers leased 218 to 491 of 800 sends twice: ``tests/alerts/test_alert_claim.py``).

    Fair: a send is taken only while its alert destination has fewer than ``per_destination`` sends in
    flight and its account fewer than ``per_account``; an account's sends are taken one per destination in
    turn, and the accounts in turn (the first due send of every account before the second of any). Two
    workers leasing at the same instant may each take a send under one cap (SKIP LOCKED): a cap is exact
    per worker, and within twice itself across two."""
    return await conn.fetch(
        _CLAIM,
        limit,
        lease_s,
        per_destination,
        per_account,
    )


async def finish(
    conn: Connection,
    *,
    send_id: str,
    attempt: int,
    started_at: datetime,
    status: int | None,
    latency_ms: int,
    success: bool,
    error: str | None,
    response_body: str | None,
    retry_in_s: float | None,
) -> bool:
    """Records the attempt and the send's new state (succeeded; pending again in ``retry_in_s``; failed when
    None), only while the send is still this attempt's. False when another worker took it over."""
    async with conn.transaction():
        state = "succeeded" if success else ("failed" if retry_in_s is None else "pending")
        updated = await conn.fetchval(
            """UPDATE alert_sends SET status = $3, lease_expires_at = NULL,
                      next_attempt_at = CASE WHEN $3 = 'pending' THEN now() + make_interval(secs => $4)
                                             ELSE next_attempt_at END
                WHERE id = $1 AND attempts = $2 AND status = 'in_flight' RETURNING true""",
            send_id,
            attempt,
            state,
            retry_in_s or 0.0,
        )
        if not updated:
            return False
        await conn.execute(
            """INSERT INTO alert_attempts (send_id, attempt, started_at, status, latency_ms, success, error,
                                           response_body)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING""",
            send_id,
            attempt,
            started_at,
            status,
            latency_ms,
            success,
            error,
            response_body,
        )
    return True


async def list_for_account(
    conn: Connection,
    account_id: str,
    *,
    limit: int,
    before: str | None,
    endpoint_id: str | None = None,
    open_only: bool = False,
) -> list[asyncpg.Record]:
    """Newest first (ids are time-ordered)."""
    return await conn.fetch(
        f"""SELECT {_ALERT_COLUMNS} FROM alerts
             WHERE account_id = $1 AND ($2::text IS NULL OR id < $2)
               AND ($3::text IS NULL OR endpoint_id = $3) AND (NOT $4 OR resolved_at IS NULL)
             ORDER BY id DESC LIMIT $5""",
        account_id,
        before,
        endpoint_id,
        open_only,
        limit,
    )


async def open_for_endpoint(conn: Connection, endpoint_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {_ALERT_COLUMNS} FROM alerts WHERE endpoint_id = $1 AND resolved_at IS NULL ORDER BY id DESC",
        endpoint_id,
    )


async def sends_of(conn: Connection, alert_ids: Sequence[str]) -> list[asyncpg.Record]:
    """The sends of these alerts with their attempts (``attempts``: a JSON array, oldest first)."""
    return await conn.fetch(
        """SELECT s.alert_id, s.alert_destination_id, s.status, s.next_attempt_at,
                  coalesce((SELECT jsonb_agg(jsonb_build_object(
                                'attempt', t.attempt, 'started_at', t.started_at, 'status', t.status,
                                'latency_ms', t.latency_ms, 'success', t.success, 'error', t.error)
                                ORDER BY t.attempt)
                              FROM alert_attempts t WHERE t.send_id = s.id), '[]'::jsonb) AS attempts
             FROM alert_sends s WHERE s.alert_id = ANY($1::text[]) ORDER BY s.alert_id, s.id""",
        list(alert_ids),
    )


async def prune(conn: Connection, *, fired_before_id: str, resolved_before: datetime, limit: int) -> int:
    """Deletes up to ``limit`` alerts resolved before ``resolved_before`` (their sends and attempts go by
    cascade); how many. ``fired_before_id`` is the lowest id of an alert fired at that time: ids are
    time-ordered, so the primary key bounds the scan to old alerts. Open alerts stay, however old: their
    condition still holds, and removing one would fire it again."""
    return int(
        await conn.fetchval(
            """WITH gone AS (
               DELETE FROM alerts WHERE id IN (
                   SELECT id FROM alerts WHERE id < $1 AND resolved_at < $2 ORDER BY id LIMIT $3)
               RETURNING 1)
           SELECT count(*) FROM gone""",
            fired_before_id,
            resolved_before,
            limit,
        )
    )


async def destination_names(conn: Connection, destination_ids: Sequence[str]) -> dict[str, str | None]:
    rows = await conn.fetch("SELECT id, name FROM destinations WHERE id = ANY($1::text[])", list(destination_ids))
    return {r["id"]: r["name"] for r in rows}
