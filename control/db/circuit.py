"""Per-destination circuit breaker state on ``destinations`` (consecutive_failures, circuit, circuit_opened_at).

closed ──N consecutive failures──▶ open ──cool-down over, one worker takes the probe──▶ half_open
  ▲                                  ▲                                                   │
  └──────────── any success ─────────┼──────────── probe succeeds ◀──────────────────────┤
                                     └──────────── probe fails ◀─────────────────────────┘

``circuit_opened_at`` is when the circuit opened or its current probe began, so a probe whose worker died
is retried one cool-down later. Updates touch the rows in id order (no deadlocks between workers) and a
success on a healthy destination writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.db.connection import Connection

__all__ = ("close_statement", "count_by_state", "pause", "record_outcomes", "take_probe")


async def count_by_state(conn: Connection) -> dict[str, int]:
    """Destinations per circuit state (closed, open, half_open), for the metrics."""
    rows = await conn.fetch("SELECT circuit, count(*) AS n FROM destinations GROUP BY circuit")
    return {row["circuit"]: row["n"] for row in rows}


async def take_probe(conn: Connection, destination_id: str, *, cooldown_s: float) -> bool:
    """Moves an open circuit whose cool-down is over to half_open; True for the one caller that did."""
    return (
        await conn.fetchval(
            """UPDATE destinations SET circuit = 'half_open', circuit_opened_at = now()
                WHERE id = $1 AND circuit <> 'closed'
                  AND coalesce(circuit_opened_at, '-infinity') <= now() - make_interval(secs => $2)
               RETURNING true""",
            destination_id,
            cooldown_s,
        )
        is not None
    )


def close_statement(param: int) -> str:
    """The UPDATE closing the circuits of destinations whose last outcome was a success (their ids: parameter
    ``$param``), touching only those not closed already. Alone in :func:`record_outcomes`, and inside the
    recorder's one-statement batch (``control.db.delivery_records.write``)."""
    return f"""UPDATE destinations SET consecutive_failures = 0, circuit = 'closed', circuit_opened_at = NULL
                WHERE id = ANY(${param}::text[]) AND (consecutive_failures <> 0 OR circuit <> 'closed')"""


_CLOSE = close_statement(1)


async def record_outcomes(
    conn: Connection,
    *,
    succeeded: Sequence[str],
    failed: Sequence[tuple[str, bool, int]],
    threshold: int,
) -> list[tuple[str, str]]:
    """Applies a batch of attempt outcomes. ``succeeded``: destinations whose last outcome was a success
    (closes the circuit). ``failed``: ``(destination_id, reset, failures)``, the failures after the batch's
    last success (``reset``: there was one) or all of them. Returns ``(destination_id, was)`` for each circuit
    opened by this batch, ``was`` the state before: ``closed`` (it opened) or ``half_open`` (its probe failed,
    so it opened again), which the log tells apart."""
    if succeeded:
        await conn.execute(_CLOSE, sorted(succeeded))
    if not failed:
        return []
    rows = sorted(failed)
    ids = [r[0] for r in rows]
    # Lock in id order first: the UPDATE below may visit the rows in any order.
    was = {
        r["id"]: r["circuit"]
        for r in await conn.fetch(
            "SELECT id, circuit FROM destinations WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE", ids
        )
    }
    failures = "CASE WHEN u.reset THEN u.failures ELSE d.consecutive_failures + u.failures END"
    opened = await conn.fetch(
        f"""UPDATE destinations d
               SET consecutive_failures = {failures},
                   circuit = CASE WHEN NOT u.reset AND d.circuit <> 'closed' THEN 'open'
                                  WHEN {failures} >= $4 THEN 'open'
                                  ELSE 'closed' END,
                   circuit_opened_at = CASE WHEN NOT u.reset AND d.circuit = 'open' THEN d.circuit_opened_at
                                            WHEN NOT u.reset AND d.circuit = 'half_open' THEN now()
                                            WHEN {failures} >= $4 THEN now()
                                            ELSE NULL END
              FROM unnest($1::text[], $2::bool[], $3::int[]) AS u(id, reset, failures)
             WHERE d.id = u.id
            RETURNING d.id, d.circuit, d.circuit_opened_at = now() AS opened_now""",
        ids,
        [r[1] for r in rows],
        [r[2] for r in rows],
        threshold,
    )
    return [(r["id"], was.get(r["id"], "closed")) for r in opened if r["circuit"] == "open" and r["opened_now"]]


async def pause(conn: Connection, pauses: dict[str, float]) -> None:
    """Destinations that answered 429 or 503 with ``Retry-After``: no delivery to them is claimed before
    ``now() + seconds`` (``paused_until``, never moved earlier; the claim pushes their due tasks back)."""
    rows = sorted(pauses.items())  # locked in id order, as record_outcomes locks them
    await conn.execute(
        """UPDATE destinations d
              SET paused_until = greatest(d.paused_until, now() + make_interval(secs => u.seconds))
             FROM unnest($1::text[], $2::float8[]) AS u(id, seconds)
            WHERE d.id = u.id""",
        [r[0] for r in rows],
        [r[1] for r in rows],
    )
