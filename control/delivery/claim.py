"""Taking due tasks: the caps (worker concurrency, per destination) and the circuit.

Candidates are locked with SKIP LOCKED, so concurrent workers split the due tasks between them; those this
worker leaves (over a cap) are simply not taken and stay due for the next look. The common case, every
circuit closed, is one statement. Only when due tasks of a destination whose circuit is not closed turn
up does a transaction handle them: pushed back (not attempted, no attempt counted) while it cools down,
and the one that wins the half-open probe is taken.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import asyncpg

from control.db import circuit as db_circuit
from control.db import tasks as db_tasks
from control.delivery.circuit import PROBE_WAIT_S, gate

__all__ = ("claim",)

_MIN_WINDOW = 16


async def claim(
    conn: asyncpg.Connection,
    *,
    free: int,
    in_flight: Mapping[str, int],
    per_destination: int,
    blocked: Collection[str],
    lease_s: float,
    cooldown_s: float,
) -> tuple[list[asyncpg.Record], float | None]:
    """Up to ``free`` tasks leased to this worker, none for a ``blocked`` destination and at most
    ``per_destination`` minus its ``in_flight`` requests for the others (each with what sending it needs,
    see ``control.db.tasks.lease``), and the seconds until the next pending task falls due."""
    if free <= 0:
        return [], None
    room = {d: max(0, per_destination - n) for d, n in in_flight.items()}
    claimed, circuit_candidates, next_due_in_s = await db_tasks.claim_ready(
        conn,
        free=free,
        window=max(2 * free, _MIN_WINDOW),
        blocked=list(blocked),
        room=room,
        per_destination=per_destination,
        lease_s=lease_s,
    )
    if circuit_candidates and len(claimed) < free:
        taken = dict(in_flight)
        for task in claimed:
            taken[task["destination_id"]] = taken.get(task["destination_id"], 0) + 1
        claimed += await _claim_through_circuits(
            conn,
            free=free - len(claimed),
            in_flight=taken,
            per_destination=per_destination,
            blocked=blocked,
            lease_s=lease_s,
            cooldown_s=cooldown_s,
        )
    return claimed, next_due_in_s


async def _claim_through_circuits(
    conn: asyncpg.Connection,
    *,
    free: int,
    in_flight: Mapping[str, int],
    per_destination: int,
    blocked: Collection[str],
    lease_s: float,
    cooldown_s: float,
) -> list[asyncpg.Record]:
    async with conn.transaction():
        candidates = await db_tasks.due_candidates(
            conn, window=max(2 * free, _MIN_WINDOW), exclude_destinations=list(blocked)
        )
        room: dict[str, int] = {}
        probes: dict[str, bool] = {}
        take: list[str] = []
        deferred: list[str] = []
        delays: list[float] = []
        for candidate in candidates:
            if len(take) >= free:
                break
            destination_id = candidate["destination_id"]
            action, wait_s = gate(candidate["circuit"], candidate["open_for_s"], cooldown_s)
            if action == "probe":
                if destination_id not in probes:
                    probes[destination_id] = await db_circuit.take_probe(conn, destination_id, cooldown_s=cooldown_s)
                    if probes[destination_id]:
                        take.append(candidate["id"])
                        continue
                action, wait_s = "wait", min(cooldown_s, PROBE_WAIT_S)
            if action == "wait":
                deferred.append(candidate["id"])
                delays.append(wait_s)
                continue
            left = room.setdefault(destination_id, per_destination - in_flight.get(destination_id, 0))
            if left > 0:
                room[destination_id] = left - 1
                take.append(candidate["id"])
        if deferred:
            await db_tasks.defer(conn, deferred, delays)
        return await db_tasks.lease(conn, take, lease_s=lease_s) if take else []
