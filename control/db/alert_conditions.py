"""What is true now, per alert condition: the detectors the alert evaluator runs every few seconds.

Each returns rows of ``(account_id, condition_key, endpoint_id, destination_id, count, data)``; the
evaluator (``control.workers.alerts.evaluator``) compares them with the open alerts. All read the state the
rest of hookyard already keeps (destinations' circuits, failed tasks, the stats counters, events), so
nothing on the capture or delivery path writes anything for alerts. ``evaluation_lock`` makes one worker at
a time the evaluator: the others skip the round, so conditions are compared once.
"""

from __future__ import annotations

import asyncpg

from control.db.connection import Connection

__all__ = (
    "EXHAUSTED_GRACE_S",
    "SIGNATURE_WINDOW_MINUTES",
    "circuits_open",
    "disabled",
    "evaluation_lock",
    "exhausted",
    "existing_destinations",
    "live_endpoints",
    "signature_failures",
    "silent",
)

SIGNATURE_WINDOW_MINUTES = 5
EXHAUSTED_GRACE_S = 120
"""An hour's ``delivery.exhausted`` summary is still counted this long into the next hour, so a task that
failed in an hour's last seconds is seen by an evaluation that runs after the hour turned."""


async def evaluation_lock(conn: Connection) -> bool:
    """Takes the evaluator's lock for the current transaction; False when another worker holds it."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_xact_lock(hashtext('hookyard.alerts.evaluate'))"))


async def wait_for_evaluation(conn: Connection) -> None:
    """Waits for the evaluator's lock and holds it for the current transaction: a change that resolves an
    alert itself (an enable) then cannot interleave with a round that read the condition before it and fires
    after it. Take it first in the transaction, before any row lock, as the evaluator does."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('hookyard.alerts.evaluate'))")


async def circuits_open(conn: Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT e.account_id, d.id AS condition_key, d.endpoint_id, d.id AS destination_id,
                  d.consecutive_failures AS count,
                  jsonb_build_object('endpoint_name', e.name, 'destination_name', d.name, 'circuit', d.circuit,
                                     'consecutive_failures', d.consecutive_failures) AS data
             FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
            WHERE d.circuit <> 'closed'"""
    )


async def disabled(conn: Connection) -> list[asyncpg.Record]:
    """Disabled destinations (``destinations_disabled`` finds the few), with their held deliveries."""
    return await conn.fetch(
        """SELECT e.account_id, d.id AS condition_key, d.endpoint_id, d.id AS destination_id,
                  (SELECT count(*) FROM delivery_tasks t WHERE t.destination_id = d.id AND t.status = 'held') AS count,
                  jsonb_build_object('endpoint_name', e.name, 'destination_name', d.name, 'reason', d.disabled_reason,
                                     'disabled_at', d.disabled_at, 'disabled_by', d.disabled_by) AS data
             FROM destinations d JOIN endpoints e ON e.id = d.endpoint_id
            WHERE d.state = 'disabled'"""
    )


async def exhausted(conn: Connection) -> list[asyncpg.Record]:
    """Per destination and UTC hour: the events whose deliveries used up their retries (or failed
    permanently) in that hour; the current hour, and the previous one for ``EXHAUSTED_GRACE_S``."""
    return await conn.fetch(
        """SELECT e.account_id, t.destination_id || '@' || to_char(h.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24')
                      AS condition_key,
                  t.endpoint_id, t.destination_id, count(DISTINCT t.event_id) AS count,
                  jsonb_build_object('hour', h.hour, 'endpoint_name', e.name,
                                     'destination_name', (SELECT d.name FROM destinations d
                                                           WHERE d.id = t.destination_id)) AS data
             FROM delivery_tasks t
             JOIN endpoints e ON e.id = t.endpoint_id
             CROSS JOIN LATERAL (SELECT date_trunc('hour', t.updated_at, 'UTC') AS hour) h
            WHERE t.status = 'failed'
              AND t.updated_at >= date_trunc('hour', now() - make_interval(secs => $1), 'UTC')
            GROUP BY e.account_id, e.name, t.endpoint_id, t.destination_id, h.hour""",
        EXHAUSTED_GRACE_S,
    )


async def signature_failures(conn: Connection, refused: dict[str, int]) -> list[asyncpg.Record]:
    """Endpoints with at least their threshold of failed signatures in the last five minutes: the stored
    events whose signature failed (the stats counters' last five minute buckets: the current minute and the
    four before it) and the requests the edges refused for their signature in those minutes (``refused``:
    endpoint id -> count, read from Redis by ``control.workers.alerts.signature_refusals``)."""
    return await conn.fetch(
        """WITH stored AS (
               SELECT s.endpoint_id, sum(s.count)::bigint AS n FROM stats_events s
                WHERE s.span = 1 AND s.failure IS NOT NULL
                  AND s.start >= date_trunc('minute', now()) - make_interval(mins => $1 - 1)
                GROUP BY s.endpoint_id),
           refused AS (SELECT * FROM unnest($2::text[], $3::bigint[]) AS r(endpoint_id, n)),
           total AS (
               SELECT endpoint_id, sum(n)::bigint AS n FROM (SELECT * FROM stored UNION ALL SELECT * FROM refused) x
                GROUP BY endpoint_id)
           SELECT e.account_id, e.id AS condition_key, e.id AS endpoint_id, NULL::text AS destination_id,
                  t.n AS count,
                  jsonb_build_object('endpoint_name', e.name,
                                     'threshold', e.signature_failure_alert_threshold, 'window_s', $1 * 60,
                                     'refused', coalesce((SELECT r.n FROM refused r WHERE r.endpoint_id = e.id), 0))
                      AS data
             FROM total t JOIN endpoints e ON e.id = t.endpoint_id
            WHERE t.n >= e.signature_failure_alert_threshold""",
        SIGNATURE_WINDOW_MINUTES,
        list(refused),
        list(refused.values()),
    )


def _rfc3339(column: str) -> str:
    """SQL of ``column`` (a timestamptz) as the API writes every time (msgspec): UTC with ``Z``, and six digits
    of microseconds unless they are zero (``2026-12-04T19:09:31.906230Z``); NULL stays NULL. A timestamptz put
    in ``jsonb`` as is reads ``...31.90623+00:00``, unlike everything else an alert or the API shows."""
    utc = f"({column} AT TIME ZONE 'UTC')"
    return (
        f"""to_char({utc}, 'YYYY-MM-DD"T"HH24:MI:SS')"""
        f" || CASE WHEN extract(microseconds FROM {utc})::bigint % 1000000 = 0 THEN '' ELSE to_char({utc}, '.US') END"
        " || 'Z'"
    )


async def silent(conn: Connection) -> list[asyncpg.Record]:
    """Endpoints with ``expect_event_within_s`` that received nothing for that long (counted from the later of
    their creation and when the setting was made)."""
    return await conn.fetch(
        f"""SELECT e.account_id, e.id AS condition_key, e.id AS endpoint_id, NULL::text AS destination_id,
                  0::bigint AS count,
                  jsonb_build_object('endpoint_name', e.name, 'expect_event_within_s', e.expect_event_within_s,
                                     'last_event_at', {_rfc3339("last.at")}) AS data
             FROM endpoints e
             LEFT JOIN LATERAL (SELECT max(ev.received_at) AS at FROM events ev
                                 WHERE ev.endpoint_id = e.id AND ev.received_at > now() - interval '1 day') last
                    ON true
            WHERE e.expect_event_within_s IS NOT NULL
              AND (e.expires_at IS NULL OR e.expires_at > now())
              AND greatest(e.created_at, coalesce(e.expect_event_since, e.created_at))
                  <= now() - make_interval(secs => e.expect_event_within_s)
              AND NOT EXISTS (SELECT 1 FROM events ev
                               WHERE ev.endpoint_id = e.id
                                 AND ev.received_at > now() - make_interval(secs => e.expect_event_within_s))"""
    )


async def live_endpoints(conn: Connection, endpoint_ids: list[str]) -> dict[str, tuple[str, str]]:
    """endpoint id -> (account id, endpoint name), for those that exist."""
    rows = await conn.fetch("SELECT id, account_id, name FROM endpoints WHERE id = ANY($1::text[])", endpoint_ids)
    return {r["id"]: (r["account_id"], r["name"]) for r in rows}


async def existing_destinations(conn: Connection, destination_ids: list[str]) -> set[str]:
    rows = await conn.fetch("SELECT id FROM destinations WHERE id = ANY($1::text[])", destination_ids)
    return {r["id"] for r in rows}
