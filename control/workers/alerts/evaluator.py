"""The alert evaluator: compares what is true now (``control.db.alert_conditions``) with the open alerts,
fires the new conditions and resolves those that ended. One transaction per round, under an advisory lock
that one worker at a time holds: with any number of workers a condition fires exactly once (and the partial
unique index ``alerts_open`` would refuse a second open alert of it even without the lock).

- ``destination.circuit_opened``: open while the destination's circuit is not closed; when it closes again
  (the destination still exists) a ``destination.recovered`` notice fires, resolved as it fires.
- ``destination.disabled``: open while the destination is disabled (a 410 answer, or by hand), its ``count``
  the deliveries held; enabling it resolves it.
- ``delivery.exhausted``: one per destination and UTC hour, its ``count`` the events whose deliveries used
  up their retries in that hour, kept current while the hour's summary is open.
- ``endpoint.signature_failures``: open while the last five minutes hold at least the endpoint's threshold of
  failed signatures, stored (``on_failure: accept_log``) or refused by the edge
  (``control.workers.alerts.signature_refusals``).
- ``endpoint.silent``: open while nothing arrived for ``expect_event_within_s``; an event resolves it.
- ``dead_letter.added``: open while the endpoint has records in the dead letters (Redis); retrying them
  (``hookyard dead-letters retry``) resolves it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial

from control.db import alert_conditions as detect
from control.db import alerts as db_alerts
from control.db.connection import Connection
from control.db.context import Context
from control.support.dead_letters import list_dead_letters
from control.workers.alerts.signature_refusals import refused_signatures
from shared import ids

__all__ = ("CONDITIONS", "Evaluated", "evaluate")

CONDITIONS = (
    "destination.circuit_opened",
    "destination.disabled",
    "delivery.exhausted",
    "endpoint.signature_failures",
    "endpoint.silent",
    "dead_letter.added",
)
"""The types that are conditions (open until resolved); ``destination.recovered`` is a notice."""
_DEAD_LETTERS_READ = 10_000
"""Per shard and round: more dead letters than this are an outage the operator already sees."""


@dataclass(slots=True)
class Evaluated:
    ran: bool = False
    """False when another worker held the evaluator's lock."""
    fired: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Now:
    account_id: str
    endpoint_id: str | None
    destination_id: str | None
    count: int
    data: dict[str, object]


async def _dead_letters(ctx: Context, conn: Connection) -> dict[str, _Now]:
    per_endpoint: dict[str, int] = defaultdict(int)
    for letter in await list_dead_letters(ctx.redis, ctx.keys, limit=_DEAD_LETTERS_READ):
        if letter.endpoint_id:
            per_endpoint[letter.endpoint_id] += 1
    live = await detect.live_endpoints(conn, list(per_endpoint)) if per_endpoint else {}
    return {
        endpoint_id: _Now(
            live[endpoint_id][0], endpoint_id, None, n, {"dead_letters": n, "endpoint_name": live[endpoint_id][1]}
        )
        for endpoint_id, n in per_endpoint.items()
        if endpoint_id in live
    }


async def _current(ctx: Context, conn: Connection) -> dict[tuple[str, str, str], _Now]:
    """(type, account, condition key) -> what holds now, for every condition type."""
    found: dict[tuple[str, str, str], _Now] = {}
    refused = await refused_signatures(ctx)
    for type_, detector in (
        ("destination.circuit_opened", detect.circuits_open),
        ("destination.disabled", detect.disabled),
        ("delivery.exhausted", detect.exhausted),
        ("endpoint.signature_failures", partial(detect.signature_failures, refused=refused)),
        ("endpoint.silent", detect.silent),
    ):
        for r in await detector(conn):
            found[(type_, r["account_id"], r["condition_key"])] = _Now(
                r["account_id"], r["endpoint_id"], r["destination_id"], r["count"], dict(r["data"])
            )
    for key, now in (await _dead_letters(ctx, conn)).items():
        found[("dead_letter.added", now.account_id, key)] = now
    return found


async def _fire(conn: Connection, type_: str, key: str, now: _Now, *, resolved: bool = False) -> str | None:
    alert_id = ids.new_id("alert")
    fired = await db_alerts.fire(
        conn,
        alert_id=alert_id,
        account_id=now.account_id,
        type=type_,
        condition_key=key,
        endpoint_id=now.endpoint_id,
        destination_id=now.destination_id,
        count=now.count,
        data=now.data,
        resolved=resolved,
    )
    return alert_id if fired else None


async def evaluate(ctx: Context) -> Evaluated:
    """One round: fire, update counts, resolve. Nothing when another worker is evaluating."""
    out = Evaluated()
    async with ctx.pool.acquire() as conn, conn.transaction():
        if not await detect.evaluation_lock(conn):
            return out
        out.ran = True
        current = await _current(ctx, conn)
        open_rows = await db_alerts.open_alerts(conn, CONDITIONS)
        opened = {(r["type"], r["account_id"], r["condition_key"]): r for r in open_rows}
        for (type_, _account, key), now in current.items():
            if (type_, _account, key) not in opened and (alert_id := await _fire(conn, type_, key, now)):
                out.fired.append(alert_id)
        await db_alerts.set_counts(
            conn, [(row["id"], current[k].count, current[k].data) for k, row in opened.items() if k in current]
        )
        ended = [row for k, row in opened.items() if k not in current]
        await db_alerts.resolve(conn, [row["id"] for row in ended])
        out.resolved.extend(row["id"] for row in ended)
        recovered = [row for row in ended if row["type"] == "destination.circuit_opened"]
        still_there = await detect.existing_destinations(conn, [row["destination_id"] for row in recovered])
        for row in recovered:
            if row["destination_id"] in still_there:
                notice = _Now(row["account_id"], row["endpoint_id"], row["destination_id"], 1, dict(row["data"]))
                notice.data["opened_alert_id"] = row["id"]
                if alert_id := await _fire(conn, "destination.recovered", row["id"], notice, resolved=True):
                    out.fired.append(alert_id)
    return out
