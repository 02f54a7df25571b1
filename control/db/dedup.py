"""Deduplication by the provider's idempotency key, per destination (issue 27; the design:
docs/adr/0036-delivery-shaping-state.md).

``delivery_dedup`` says which task owns an idempotency key at a destination. Before a claimed task of a
deduplicating destination is sent, one statement per claimed batch asks for its key (``decide``):

- nobody owns it, the task owns it already (its own retry), or the owner failed for good or took the key
  longer than the destination's window ago: the task takes it and is **sent**;
- the owner succeeded within the window: the task is **skipped**, finished as succeeded with a delivery
  record that names the owner's event (``duplicate_of``), no request made;
- the owner is pending or in flight: the task **waits**, handed back unsent until about when the owner's
  next attempt is decided (a copy is never sent while the delivery it may duplicate can still succeed).

Two workers asking for one key at once are serialised by the primary key (the second INSERT waits for the
first to commit, then sees its row); keys are taken in (destination, key) order, so two batches never
deadlock. The owner's status is read from the statement's snapshot, which can only be older: an owner
not seen at all, or seen unfinished, makes the task wait, never sent twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from control.db.connection import Connection

__all__ = ("Ask", "decide", "prune")

WAIT_S = 1.0
"""A waiting copy is looked at again this long after its owner's next attempt is due (or after now)."""


class Ask(NamedTuple):
    """One claimed task asking for its idempotency key; ``delivery_id`` names the record written if it is a
    duplicate."""

    task_id: str
    attempts: int
    destination_id: str
    idempotency_key: str
    event_id: str
    endpoint_id: str
    rule_id: str
    destination_name: str | None
    destination_url: str | None
    delivery_id: str


_TAKE = """(x.task_id = excluded.task_id
            OR x.taken_at < now() - make_interval(secs => coalesce(
                   (SELECT d.deduplicate_window_s FROM destinations d WHERE d.id = x.destination_id), 0))
            OR EXISTS (SELECT 1 FROM delivery_tasks f WHERE f.id = x.task_id AND f.status = 'failed'))"""
"""The asking task takes the key: it is the owner, the window is over, or the owner is seen failed for good
(an owner not seen at all may be newer than this statement's snapshot, and makes the task wait)."""

_DECIDE = f"""
WITH u AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                         $8::text[], $9::text[], $10::text[])
           AS u(task_id, attempts, destination_id, key, event_id, endpoint_id, rule_id, destination_name,
                destination_url, delivery_id)
), firsts AS (
    SELECT DISTINCT ON (destination_id, key) destination_id, key, task_id, event_id
      FROM u ORDER BY destination_id, key, task_id
), took AS (
    INSERT INTO delivery_dedup AS x (destination_id, idempotency_key, task_id, event_id)
    SELECT destination_id, key, task_id, event_id FROM firsts ORDER BY destination_id, key
    ON CONFLICT (destination_id, idempotency_key) DO UPDATE
       SET task_id = CASE WHEN {_TAKE} THEN excluded.task_id ELSE x.task_id END,
           event_id = CASE WHEN {_TAKE} THEN excluded.event_id ELSE x.event_id END,
           taken_at = CASE WHEN {_TAKE} THEN now() ELSE x.taken_at END
    RETURNING x.destination_id, x.idempotency_key AS key, x.task_id AS owner_task, x.event_id AS owner_event
), decided AS (
    SELECT u.*, k.owner_event,
           CASE WHEN k.owner_task = u.task_id THEN 'send'
                WHEN o.status = 'succeeded' THEN 'skip'
                ELSE 'wait' END AS decision,
           CASE WHEN o.status = 'pending' THEN greatest(extract(epoch FROM o.next_attempt_at - now())::float8, 0)
                ELSE 0 END + {WAIT_S} AS wait_s
      FROM u JOIN took k ON k.destination_id = u.destination_id AND k.key = u.key
      LEFT JOIN delivery_tasks o ON o.id = k.owner_task
), skipped AS (
    UPDATE delivery_tasks t SET status = 'succeeded', lease_expires_at = NULL, last_error = NULL, updated_at = now()
      FROM decided s
     WHERE s.decision = 'skip' AND t.id = s.task_id AND t.attempts = s.attempts AND t.status = 'in_flight'
    RETURNING t.id
), recorded AS (
    INSERT INTO deliveries (id, endpoint_id, event_id, task_id, destination_id, destination_name, destination_url,
                            rule_id, source, attempt_number, success, duplicate_of)
    SELECT s.delivery_id, s.endpoint_id, s.event_id, s.task_id, s.destination_id, s.destination_name,
           s.destination_url, s.rule_id, 'rule', s.attempts, true, s.owner_event
      FROM decided s JOIN skipped k ON k.id = s.task_id
    ON CONFLICT (id) DO NOTHING
), waiting AS (
    UPDATE delivery_tasks t
       SET status = 'pending', attempts = t.attempts - 1, lease_expires_at = NULL, updated_at = now(),
           next_attempt_at = now() + make_interval(secs => w.wait_s)
      FROM decided w
     WHERE w.decision = 'wait' AND t.id = w.task_id AND t.attempts = w.attempts AND t.status = 'in_flight'
)
SELECT task_id, decision, owner_event FROM decided
"""


async def decide(conn: Connection, asks: Sequence[Ask]) -> dict[str, tuple[str, str]]:
    """Per asking task id: ``(decision, owner event id)`` with decision ``send``, ``skip`` (finished and
    recorded here) or ``wait`` (handed back here). One statement: atomic without a transaction of its own."""
    if not asks:
        return {}
    rows = await conn.fetch(_DECIDE, *(list(column) for column in zip(*asks, strict=True)))
    return {r["task_id"]: (r["decision"], r["owner_event"]) for r in rows}


async def prune(conn: Connection, *, limit: int = 10_000) -> int:
    """Removes up to ``limit`` keys whose window is over (or whose destination stopped deduplicating);
    how many went. A key is also taken over once its window is over, so this only frees the space."""
    done = await conn.execute(
        """DELETE FROM delivery_dedup WHERE ctid = ANY(ARRAY(
               SELECT x.ctid FROM delivery_dedup x JOIN destinations d ON d.id = x.destination_id
                WHERE d.deduplicate_window_s IS NULL
                   OR x.taken_at < now() - make_interval(secs => d.deduplicate_window_s)
                LIMIT $1))""",
        limit,
    )
    return int(done.rsplit(" ", 1)[-1])
