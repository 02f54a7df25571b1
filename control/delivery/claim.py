"""Taking due tasks: the caps (worker concurrency, per destination) and the circuit.

Candidates are locked with SKIP LOCKED, so concurrent workers split the due tasks between them; those this
worker leaves (over a cap) are simply not taken and stay due for the next look. The common case, every
circuit closed, is one statement. Only when due tasks of a destination whose circuit is not closed turn
up does a transaction handle them: pushed back (not attempted, no attempt counted) while it cools down,
and the one that wins the half-open probe is taken. A destination paused by ``Retry-After`` is handled
the same way: its due tasks are pushed back to the end of the pause. A disabled destination's due tasks
(routed, retried or answered after it was disabled) are held (``control.db.destination_state``).

Tasks of FIFO destinations are claimed by a second statement, at the heads of their queues
(``control.db.ordering``), and only when the first one says some are pending: a batch of unordered tasks
costs one statement, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

import msgspec

from control.db import circuit as db_circuit
from control.db import ordering as db_ordering
from control.db import tasks as db_tasks
from control.db.connection import Connection
from control.db.leased import LeasedTask
from control.delivery.circuit import PROBE_WAIT_S, gate
from control.delivery.shares import Accounts

__all__ = ("HELD_RECHECK_S", "Watermarks", "claim")

_MIN_WINDOW = 16
HELD_RECHECK_S = 0.05
"""A FIFO head held back only by the stream watermark (its flush batch not yet acknowledged) is looked at
again this soon: nothing wakes the worker when the flush acknowledges."""

Watermarks = Callable[[], Awaitable[Sequence[str | None] | None]]
"""Reads the stream watermarks for a FIFO claim (``control.delivery.ordering``); None: cannot tell now."""


async def claim(
    conn: Connection,
    *,
    free: int,
    in_flight: Mapping[str, int],
    per_destination: int,
    blocked: Collection[str],
    lease_s: float,
    cooldown_s: float,
    caps: Mapping[str, int] | None = None,
    watermarks: Watermarks | None = None,
    accounts: Accounts | None = None,
) -> tuple[list[LeasedTask], float | None]:
    """Up to ``free`` tasks leased to this worker, none for a ``blocked`` destination and at most
    ``per_destination`` (or its entry in ``caps``) minus its ``in_flight`` requests for the others (each
    with what sending it needs, see ``control.db.tasks.lease``), and the seconds until the next pending
    task falls due. FIFO tasks are looked at only with ``watermarks``. ``accounts``: the room each account
    has left in this worker (``control.delivery.shares``), none for a blocked one."""
    if free <= 0:
        return [], None
    caps = caps or {}
    accounts = accounts or Accounts()
    room = {d: max(0, caps.get(d, per_destination) - in_flight.get(d, 0)) for d in {*in_flight, *caps}}
    window = max(2 * free, _MIN_WINDOW)
    ask = db_tasks.Claim(
        free=free,
        window=window,
        blocked=list(blocked),
        room=room,
        per_destination=per_destination,
        lease_s=lease_s,
        blocked_accounts=accounts.blocked,
        account_room=accounts.room,
        per_account=accounts.per_account,
    )
    claimed, circuit_candidates, next_due_in_s, fifo_pending = await db_tasks.claim_ready(conn, ask)
    marks = None
    if fifo_pending and watermarks is not None and len(claimed) < free:
        marks = await watermarks()
    if marks is not None:
        rest = msgspec.structs.replace(
            ask,
            free=free - len(claimed),
            room=_less(room, claimed, caps, per_destination),
            account_room=accounts.less(claimed),
        )
        heads, head_candidates, heads_due_in_s, held = await db_ordering.claim_heads(conn, rest, marks)
        claimed += heads
        circuit_candidates += head_candidates
        for due_in_s in (heads_due_in_s, HELD_RECHECK_S if held else None):
            if due_in_s is not None:
                next_due_in_s = due_in_s if next_due_in_s is None else min(next_due_in_s, due_in_s)
    if circuit_candidates and len(claimed) < free:
        taken = dict(in_flight)
        for task in claimed:
            taken[task.destination_id] = taken.get(task.destination_id, 0) + 1
        claimed += await _claim_through_circuits(
            conn,
            free=free - len(claimed),
            in_flight=taken,
            per_destination=per_destination,
            caps=caps,
            blocked=blocked,
            lease_s=lease_s,
            cooldown_s=cooldown_s,
            watermarks=marks,
            accounts=msgspec.structs.replace(accounts, room=accounts.less(claimed)),
        )
    return claimed, next_due_in_s


def _less(
    room: Mapping[str, int], claimed: Sequence[LeasedTask], caps: Mapping[str, int], per_destination: int
) -> dict[str, int]:
    """The room per destination left after ``claimed``."""
    left = dict(room)
    for task in claimed:
        destination_id = task.destination_id
        left[destination_id] = max(0, left.get(destination_id, caps.get(destination_id, per_destination)) - 1)
    return left


async def _claim_through_circuits(
    conn: Connection,
    *,
    free: int,
    in_flight: Mapping[str, int],
    per_destination: int,
    caps: Mapping[str, int],
    blocked: Collection[str],
    lease_s: float,
    cooldown_s: float,
    watermarks: Sequence[str | None] | None,
    accounts: Accounts,
) -> list[LeasedTask]:
    async with conn.transaction():
        window = max(2 * free, _MIN_WINDOW)
        no = {"exclude_destinations": list(blocked), "exclude_accounts": list(accounts.blocked)}
        candidates = await db_tasks.due_candidates(conn, window=window, **no)
        if watermarks is not None:
            candidates += await db_ordering.head_candidates(conn, window=window, watermarks=watermarks, **no)
        room: dict[str, int] = {}
        account_room = dict(accounts.room)
        probes: dict[str, bool] = {}
        take: list[str] = []
        held: list[str] = []
        deferred: list[str] = []
        delays: list[float] = []
        for candidate in candidates:
            if len(take) >= free:
                break
            destination_id = candidate["destination_id"]
            if candidate["disabled"]:  # held until the destination is enabled again, no attempt spent
                held.append(candidate["id"])
                continue
            if candidate["paused_for_s"] is not None:  # the destination asked for no deliveries until then
                deferred.append(candidate["id"])
                delays.append(candidate["paused_for_s"])
                continue
            action, wait_s = gate(candidate["circuit"], candidate["open_for_s"], cooldown_s)
            if action == "probe":
                if destination_id not in probes:
                    probes[destination_id] = await db_circuit.take_probe(conn, destination_id, cooldown_s=cooldown_s)
                    if probes[destination_id]:  # one per destination: past the account's room too
                        take.append(candidate["id"])
                        continue
                action, wait_s = "wait", min(cooldown_s, PROBE_WAIT_S)
            if action == "wait":
                deferred.append(candidate["id"])
                delays.append(wait_s)
                continue
            cap = caps.get(destination_id, per_destination)
            left = room.setdefault(destination_id, cap - in_flight.get(destination_id, 0))
            account_left = account_room.setdefault(candidate["account_id"], accounts.per_account)
            if left > 0 and account_left > 0:
                room[destination_id] = left - 1
                account_room[candidate["account_id"]] = account_left - 1
                take.append(candidate["id"])
        if deferred:
            await db_tasks.defer(conn, deferred, delays)
        if held:
            await db_tasks.hold(conn, held)
        return await db_tasks.lease(conn, take, lease_s=lease_s) if take else []
