"""Delivery tasks: one row per (event, rule, destination), claimed by deliver workers with SKIP LOCKED.

Lifecycle (``status``):
    pending ──claim──▶ in_flight ──2xx──▶ succeeded
       ▲  ▲               │ failed, attempts left: pending again at ``next_attempt_at``
       │  └───────────────┤ failed for good (permanent, or out of attempts): failed
       │   lease expired  │ (worker died) / drain cancelled: pending now
       └── circuit open: ``next_attempt_at`` pushed back, no attempt counted

``attempts`` counts claims and doubles as the fencing token: a result is written only while the task
still has the attempt number it was claimed with, so a late result never overwrites a newer claim's.
Every query that writes tasks expects the caller's transaction when it has several statements.

The claim here takes unordered tasks (``order_key`` null). Tasks of a FIFO destination are claimed at the
head of their queue (``control.db.ordering``, with the same statement's tail), and a destination paused by a
``Retry-After`` (``paused_until``) is treated like one whose circuit is not closed: its due tasks are pushed
back until the pause ends (``control.delivery.claim``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import asyncpg
import msgspec

from control.db.connection import Connection
from control.db.leased import LEASED_COLUMNS, LeasedTask, leased

__all__ = (
    "NOTIFY_CHANNEL",
    "NOT_BLOCKED_ACCOUNT",
    "NO_ACCOUNT_CAP",
    "Claim",
    "claim_ready",
    "claim_statement",
    "defer",
    "due_candidates",
    "finish",
    "finish_statement",
    "hand_back",
    "hold",
    "lease",
    "lock_for_retry",
    "make_due",
    "next_due_in_s",
    "release",
    "renew",
    "results_columns",
    "sweep_expired",
    "window_for",
)

NO_ACCOUNT_CAP = 1_000_000
"""``Claim.per_account`` when the caller sets no cap per account."""
NOT_BLOCKED_ACCOUNT = "NOT coalesce(d.account_id = ANY({param}::text[]), false)"
"""Leaves out candidates of blocked accounts (their destination ``d``'s account, copied from its endpoint by
migration 0042: no lookup per candidate); written like the blocked destinations' filter (ADR 0042)."""

NOTIFY_CHANNEL = "hy_tasks"
"""Postgres channel the flush NOTIFYs (on commit) when it created tasks; deliver workers LISTEN on it."""

CIRCUIT = "CASE WHEN d.state = 'disabled' THEN 'disabled' WHEN d.paused_until > now() THEN 'paused' ELSE d.circuit END"
"""A candidate's gate: its destination's circuit, ``paused`` while a ``Retry-After`` pause lasts, or
``disabled`` (its task is held: ``control.db.destination_state``)."""
CANDIDATE_GATE = """CASE WHEN d.circuit = 'closed' THEN NULL
                       ELSE extract(epoch FROM now() - coalesce(d.circuit_opened_at, now()))::float8 END
                       AS open_for_s,
                  CASE WHEN d.paused_until > now() THEN extract(epoch FROM d.paused_until - now())::float8 END
                       AS paused_for_s,
                  d.state = 'disabled' AS disabled"""
"""What the circuit path decides a candidate by (``due_candidates``), from its destination ``d``."""


def claim_statement(cand: str, meta: str, ctes: str = "") -> str:
    """One claim statement (one round trip, no explicit transaction): ``cand`` locks the candidates (SKIP
    LOCKED; columns id, destination_id, account_id, next_attempt_at, circuit), the rest leases those whose
    circuit is closed within each destination's room and each account's (accounts in turns: the first of
    each, then the second, ...) and reports how many candidates had a circuit that is not closed
    (the caller handles those in a transaction) plus ``meta``'s columns. Always one row more than the claimed
    tasks: the meta row (null task). Parameters: $1 free, $2 blocked destinations, $3/$4 room per destination,
    $5 the default room, $6 lease seconds, $7 blocked accounts (for ``cand``'s filter), $8/$9 room per
    account, $10 the default; ``cand`` has the window as a literal (:func:`window_for`). ``ctes``:
    more common table expressions for both (``name AS (...), ``).

    The tasks come oldest due first, the order the worker starts them in: a destination capped below what was
    claimed for it gets its deliveries in the order they fell due, not in the order ``UPDATE ... RETURNING``
    happened to produce."""
    return f"""
WITH {ctes}cand AS ({cand}), ranked AS (
    SELECT c.id, c.account_id, c.circuit, c.next_attempt_at, coalesce(r.room, $5) AS room,
           row_number() OVER (PARTITION BY c.destination_id ORDER BY c.next_attempt_at, c.id) AS rn
      FROM cand c LEFT JOIN unnest($3::text[], $4::int[]) AS r(destination_id, room)
           ON r.destination_id = c.destination_id
), eligible AS (
    SELECT k.id, k.next_attempt_at, coalesce(ar.room, $10) AS account_room,
           row_number() OVER (PARTITION BY k.account_id ORDER BY k.next_attempt_at, k.id) AS an
      FROM ranked k LEFT JOIN unnest($8::text[], $9::int[]) AS ar(account_id, room) ON ar.account_id = k.account_id
     WHERE k.circuit = 'closed' AND k.rn <= k.room
), picked AS (
    SELECT id FROM eligible WHERE an <= account_room ORDER BY an, next_attempt_at, id LIMIT $1
), claimed AS (
    UPDATE delivery_tasks t
       SET status = 'in_flight', attempts = t.attempts + 1, updated_at = now(),
           lease_expires_at = now() + make_interval(secs => $6)
      FROM picked WHERE t.id = picked.id
    RETURNING t.id, t.endpoint_id, t.event_id, t.event_received_at, t.rule_id, t.destination_id, t.attempts,
              t.dedup_key, t.order_key, t.next_attempt_at, t.traceparent
), meta AS (
    SELECT (SELECT count(*) FROM cand WHERE circuit <> 'closed') AS circuit_candidates, {meta}
)
SELECT m.*, x.*
  FROM meta m LEFT JOIN (
       SELECT {LEASED_COLUMNS}, c.next_attempt_at
         FROM claimed c
         JOIN destinations d ON d.id = c.destination_id
         LEFT JOIN events e ON e.id = c.event_id AND e.received_at = c.event_received_at
  ) x ON true
 ORDER BY x.next_attempt_at, x.id
"""


def window_for(window: int) -> int:
    """The candidate window a claim statement is written with: ``window`` rounded up to the next of 16, 24, 32,
    48, 64, 96, ... (at most half as much again).

    Why a literal, not a parameter: with ``LIMIT $n`` the planner costs the generic plan as if a tenth of every
    due task were locked and updated, so with a backlog of tens of thousands Postgres never takes it and plans
    the claim on every call, the ``events`` join over every day partition included: about 0.7 ms of planning
    per claim, more than running it (ADR 0042, amendment of 2026-11-29). With the window written in, each size
    is its own prepared statement whose generic plan is costed for that window and taken after five calls."""
    size = 16
    while size < window:
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


@functools.cache
def _claim_ready(window: int) -> str:
    """The oldest due unordered tasks, ``window`` of them locked as candidates; the meta row also says when the
    next one falls due and whether any FIFO task is pending (the caller then looks at the heads of the queues:
    ``control.db.ordering``). The blocked filter is written so that its generic plan is right (ADR 0042): with
    an unknown array, ``destination_id <> ALL($2)`` is estimated to keep one row when one destination has every
    task, so the generic plan (seq scan and sort) lost to a custom plan made on every call. ``NOT
    coalesce(...)`` is estimated at half, whatever $2."""
    return claim_statement(
        f"""SELECT t.id, t.destination_id, d.account_id, t.next_attempt_at, {CIRCUIT} AS circuit
      FROM delivery_tasks t JOIN destinations d ON d.id = t.destination_id
     WHERE t.status = 'pending' AND t.order_key IS NULL AND t.next_attempt_at <= now()
       AND NOT coalesce(t.destination_id = ANY($2::text[]), false)
       AND {NOT_BLOCKED_ACCOUNT.format(param="$7")}
     ORDER BY t.next_attempt_at
     LIMIT {int(window)}
       FOR UPDATE OF t SKIP LOCKED""",
        """(SELECT extract(epoch FROM min(next_attempt_at) - now())::float8 FROM delivery_tasks
             WHERE status = 'pending' AND order_key IS NULL AND next_attempt_at > now()) AS next_due_in_s,
           EXISTS (SELECT 1 FROM delivery_tasks WHERE order_key IS NOT NULL AND status = 'pending') AS fifo_pending""",
    )


class Claim(msgspec.Struct, kw_only=True, frozen=True):
    """What one claim asks for, the same for both claim statements (unordered tasks, :func:`claim_ready`; FIFO
    heads, ``control.db.ordering.claim_heads``): up to ``free`` tasks of destinations with a closed circuit (and
    no pause), none of a ``blocked`` one, at most ``room`` (default ``per_destination``) per destination, from
    the oldest ``window`` due candidates (rounded up by :func:`window_for`), leased for ``lease_s``.

    Per account (docs/adr/0093-a-fair-share-of-the-deliver-loop.md): none of a ``blocked_accounts`` one (not
    even as a candidate: its backlog cannot fill the window), at most ``account_room`` (default
    ``per_account``) of the others, and the accounts taken in turns (each one's oldest first) when there are
    more tasks than ``free``."""

    free: int
    window: int
    blocked: Sequence[str]
    room: Mapping[str, int]
    per_destination: int
    lease_s: float
    blocked_accounts: Sequence[str] = ()
    account_room: Mapping[str, int] = msgspec.field(default_factory=dict)
    per_account: int = NO_ACCOUNT_CAP

    def params(self) -> tuple[object, ...]:
        """$1 to $10 of both statements."""
        return (
            self.free,
            list(self.blocked),
            list(self.room),
            list(self.room.values()),
            self.per_destination,
            self.lease_s,
            list(self.blocked_accounts),
            list(self.account_room),
            list(self.account_room.values()),
            self.per_account,
        )


async def claim_ready(conn: Connection, ask: Claim) -> tuple[list[LeasedTask], int, float | None, bool]:
    """Leases the due unordered tasks ``ask`` allows: (the tasks as ``lease`` returns them, how many due
    candidates had a circuit that is not closed or a pause, seconds until the next pending unordered task is
    due, whether any FIFO task is pending)."""
    rows = await conn.fetch(_claim_ready(window_for(ask.window)), *ask.params())
    meta = rows[0]
    claimed = leased(rows)
    return claimed, meta["circuit_candidates"], meta["next_due_in_s"], meta["fifo_pending"]


async def due_candidates(
    conn: Connection, *, window: int, exclude_destinations: Sequence[str], exclude_accounts: Sequence[str] = ()
) -> list[asyncpg.Record]:
    """Up to ``window`` due pending unordered tasks, oldest due first, locked (SKIP LOCKED: other workers take
    the rest) until the caller's transaction ends, with their account, their destination's circuit and, unless
    it is closed, ``open_for_s``: the seconds since it opened (or since its last probe began); ``paused_for_s``:
    the seconds a ``Retry-After`` pause still lasts (null: none)."""
    return await conn.fetch(
        f"""SELECT t.id, t.destination_id, d.account_id, d.circuit, {CANDIDATE_GATE}
             FROM delivery_tasks t JOIN destinations d ON d.id = t.destination_id
            WHERE t.status = 'pending' AND t.order_key IS NULL AND t.next_attempt_at <= now()
              AND t.destination_id <> ALL($2::text[]) AND {NOT_BLOCKED_ACCOUNT.format(param="$3")}
            ORDER BY t.next_attempt_at
            LIMIT $1
              FOR UPDATE OF t SKIP LOCKED""",
        window,
        list(exclude_destinations),
        list(exclude_accounts),
    )


async def defer(conn: Connection, task_ids: Sequence[str], delays_s: Sequence[float]) -> None:
    """Pushes pending tasks back without counting an attempt (their destination's circuit is open)."""
    await conn.execute(
        """UPDATE delivery_tasks t SET next_attempt_at = now() + make_interval(secs => u.delay), updated_at = now()
             FROM unnest($1::text[], $2::float8[]) AS u(id, delay)
            WHERE t.id = u.id AND t.status = 'pending'""",
        list(task_ids),
        list(delays_s),
    )


async def hold(conn: Connection, task_ids: Sequence[str]) -> None:
    """Holds pending tasks of disabled destinations (``control.db.destination_state``): no attempt counted."""
    await conn.execute(
        """UPDATE delivery_tasks SET status = 'held', updated_at = now()
            WHERE id = ANY($1::text[]) AND status = 'pending'""",
        list(task_ids),
    )


async def lease(conn: Connection, task_ids: Sequence[str], *, lease_s: float) -> list[LeasedTask]:
    """Marks the tasks in flight for ``lease_s`` and counts the attempt; returns each with what sending it
    needs: the event (null columns when the event is no longer stored) and the destination, oldest due first."""
    rows = await conn.fetch(
        f"""WITH claimed AS (
               UPDATE delivery_tasks SET status = 'in_flight', attempts = attempts + 1,
                      lease_expires_at = now() + make_interval(secs => $2), updated_at = now()
                WHERE id = ANY($1::text[]) AND status = 'pending'
               RETURNING id, endpoint_id, event_id, event_received_at, rule_id, destination_id, attempts, dedup_key,
                         order_key, next_attempt_at, traceparent
           )
           SELECT {LEASED_COLUMNS}
             FROM claimed c
             JOIN destinations d ON d.id = c.destination_id
             LEFT JOIN events e ON e.id = c.event_id AND e.received_at = c.event_received_at
            ORDER BY c.next_attempt_at, c.id""",
        list(task_ids),
        lease_s,
    )
    return leased(rows)


def finish_statement(first: int, also: str = "") -> str:
    """The UPDATE writing attempt results: five arrays (id, attempts, status, delay, error) as parameters
    ``$first`` to ``$first + 4``, fenced on ``attempts``; ``also``: one more condition (``AND ...``). Used alone
    (:func:`finish`) and inside the recorder's one-statement batch (``control.db.delivery_records.write``)."""
    ids, attempts, statuses, delays, errors = (f"${first + i}" for i in range(5))
    return f"""UPDATE delivery_tasks t
              SET status = u.status, lease_expires_at = NULL, last_error = u.error, updated_at = now(),
                  next_attempt_at = CASE WHEN u.delay IS NULL THEN t.next_attempt_at
                                         ELSE now() + make_interval(secs => u.delay) END
             FROM unnest({ids}::text[], {attempts}::int[], {statuses}::text[], {delays}::float8[], {errors}::text[])
                  AS u(id, attempts, status, delay, error)
            WHERE t.id = u.id AND t.attempts = u.attempts AND t.status IN ('in_flight', 'pending'){also}"""


_FINISH = finish_statement(1)


def results_columns(
    results: Sequence[tuple[str, int, str, float | None, str | None]],
) -> list[list[object]]:
    """``(id, attempts, status, retry_in_s, error)`` results as :func:`finish_statement`'s five arrays."""
    return [list(c) for c in zip(*results, strict=True)] if results else [[], [], [], [], []]


async def finish(
    conn: Connection,
    results: Sequence[tuple[str, int, str, float | None, str | None]],
) -> int:
    """Writes attempt results ``(id, attempts, status, retry_in_s, error)``: ``status`` is succeeded,
    failed, or pending with ``retry_in_s``. Fenced on ``attempts``; returns how many tasks were updated."""
    if not results:
        return 0
    done = await conn.execute(_FINISH, *results_columns(results))
    return int(done.rsplit(" ", 1)[-1])


async def hand_back(conn: Connection, tasks: Sequence[tuple[str, int, float | None]]) -> int:
    """Gives claimed tasks ``(id, attempts, delay_s)`` back unsent: pending again in ``delay_s`` (None: due as
    they were, as if never claimed), and the claim's attempt uncounted. Nothing went out: a rate limit had no
    room for it, its destination paused, a duplicate waits for the delivery it may duplicate, or it was claimed
    ahead (``control.delivery.ready``) and not started in time. Fenced on ``attempts``; how many went back."""
    if not tasks:
        return 0
    ids, attempts, delays = (list(c) for c in zip(*tasks, strict=True))
    done = await conn.execute(
        """UPDATE delivery_tasks t
              SET status = 'pending', attempts = t.attempts - 1, lease_expires_at = NULL, updated_at = now(),
                  next_attempt_at = coalesce(now() + make_interval(secs => u.delay), t.next_attempt_at)
             FROM unnest($1::text[], $2::int[], $3::float8[]) AS u(id, attempts, delay)
            WHERE t.id = u.id AND t.attempts = u.attempts AND t.status = 'in_flight'""",
        ids,
        attempts,
        delays,
    )
    return int(done.rsplit(" ", 1)[-1])


async def renew(conn: Connection, tasks: Sequence[tuple[str, int]], *, lease_s: float) -> set[str]:
    """Leases claimed tasks ``(id, attempts)`` again for ``lease_s`` from now, unsent and their attempt still
    counted once; returns the ids renewed. Fenced like ``hand_back`` and ``finish``: only a task still in
    flight with the attempt it was claimed with, so never one swept meanwhile (pending again, or claimed again
    with the next attempt: that one's claimant holds it). One whose lease ran out but was not swept yet is
    still this worker's alone, and the row lock orders this statement with a sweep. For tasks claimed ahead
    whose transform ran ahead and came too late to be sent within their first lease
    (``control.delivery.returns``)."""
    if not tasks:
        return set()
    ids, attempts = (list(c) for c in zip(*tasks, strict=True))
    renewed: list[str] = await conn.fetchval(
        """WITH renewed AS (
               UPDATE delivery_tasks t SET lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
                 FROM unnest($1::text[], $2::int[]) AS u(id, attempts)
                WHERE t.id = u.id AND t.attempts = u.attempts AND t.status = 'in_flight'
            RETURNING t.id)
           SELECT coalesce(array_agg(id), '{}') FROM renewed""",
        ids,
        attempts,
        lease_s,
    )
    return set(renewed)


async def release(conn: Connection, tasks: Sequence[tuple[str, int]]) -> None:
    """Hands in-flight tasks back at once (a draining worker gave up on them); the attempt stays counted: its
    request may have reached the destination. Those that put nothing on the wire go back with ``hand_back``."""
    if tasks:
        ids, attempts = (list(c) for c in zip(*tasks, strict=True))
        await conn.execute(
            """UPDATE delivery_tasks t SET status = 'pending', lease_expires_at = NULL, next_attempt_at = now(),
                      last_error = 'attempt interrupted (worker shutting down)', updated_at = now()
                 FROM unnest($1::text[], $2::int[]) AS u(id, attempts)
                WHERE t.id = u.id AND t.attempts = u.attempts AND t.status = 'in_flight'""",
            ids,
            attempts,
        )


async def sweep_expired(conn: Connection, *, max_attempts: int, exclude: Sequence[str] = (), limit: int = 1000) -> int:
    """Tasks whose lease ran out (their worker died mid-attempt) become due again at once, or failed when
    that was their last attempt. ``exclude``: tasks the sweeping worker still holds itself (a send in
    flight, a result not yet written), which are not lost and must not be sent again. SKIP LOCKED: never
    waits for, or deadlocks with, a worker finishing one."""
    done = await conn.execute(
        """UPDATE delivery_tasks t
              SET status = CASE WHEN t.attempts >= $1 THEN 'failed' ELSE 'pending' END,
                  lease_expires_at = NULL, next_attempt_at = now(), updated_at = now(),
                  last_error = 'lease expired: the worker stopped during attempt ' || t.attempts
            WHERE t.id IN (SELECT id FROM delivery_tasks
                            WHERE status = 'in_flight' AND lease_expires_at < now() AND id <> ALL($3::text[])
                            LIMIT $2 FOR UPDATE SKIP LOCKED)""",
        max_attempts,
        limit,
        list(exclude),
    )
    return int(done.rsplit(" ", 1)[-1])


async def next_due_in_s(conn: Connection) -> float | None:
    """Seconds until the earliest pending task is due (≤ 0: now), FIFO ones included; None when nothing is
    pending."""
    found: float | None = await conn.fetchval(
        """SELECT extract(epoch FROM min(next_attempt_at) - now())::float8
             FROM delivery_tasks WHERE status = 'pending'"""
    )
    return found


async def lock_for_retry(conn: Connection, task_id: str) -> asyncpg.Record | None:
    """The task, locked until the caller's transaction ends (its deliver worker's result waits for it), with
    ``event_found``: whether its event is still stored (retention may have dropped it)."""
    return await conn.fetchrow(
        """SELECT t.id, t.status, t.attempts, t.event_id, t.rule_id, t.destination_id, t.endpoint_id,
                  coalesce(t.traceparent, (SELECT e.traceparent FROM events e
                                            WHERE e.id = t.event_id AND e.received_at = t.event_received_at))
                      AS traceparent,
                  EXISTS (SELECT 1 FROM events e WHERE e.id = t.event_id AND e.received_at = t.event_received_at)
                      AS event_found,
                  (SELECT e.body_expired_at FROM events e
                    WHERE e.id = t.event_id AND e.received_at = t.event_received_at) AS body_expired_at
             FROM delivery_tasks t WHERE t.id = $1
              FOR UPDATE OF t""",
        task_id,
    )


async def make_due(conn: Connection, task_id: str, traceparent: str | None = None) -> asyncpg.Record | None:
    """A task that is not in flight becomes pending and due at once, no attempt counted: one more attempt,
    whatever it was (succeeded, waiting for a scheduled retry, or failed for good: the schedule has no wait
    after its last attempt, so a failure fails it again). NOTIFYs the deliver workers (sent at commit).
    A retry by hand is never deduplicated: the task's ``dedup_key`` goes. ``traceparent``: the retry's span,
    which its attempts are children of from now on (None: as before). Returns ``attempts`` and
    ``next_attempt_at``; None when the task is in flight or gone."""
    row = await conn.fetchrow(
        """UPDATE delivery_tasks SET status = 'pending', next_attempt_at = now(), lease_expires_at = NULL,
                  dedup_key = NULL, updated_at = now(), traceparent = coalesce($2, traceparent)
            WHERE id = $1 AND status <> 'in_flight'
           RETURNING attempts, next_attempt_at""",
        task_id,
        traceparent,
    )
    if row is not None:
        await conn.execute("SELECT pg_notify($1, '')", NOTIFY_CHANNEL)
    return row
