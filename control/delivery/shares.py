"""An account's share of a deliver worker: what one account may hold of its loop (in flight and claimed ahead).

Why: the worker's slots (``deliver_concurrency``) were capped per destination only, so one account with a few
destinations that never answer held every slot until the send timeout, and every other account's deliveries
waited for it (a hostile tenant's 5 hanging destinations × 32 took all 128 slots; a neighbour's p95 went from
55 ms to 12.7 s). Now an account holds at most ``deliver_account_share`` of the slots (``Shares.cap``), so the
rest is always there for the others; and when several accounts have work, the claim takes them in turns
(``control.db.tasks.claim_statement``). The design and its default: docs/adr/0093-a-fair-share-of-the-deliver-loop.md.

What counts: per destination, what the destination caps compare (its sends in flight and tasks claimed ahead,
less what its pace allows ahead: ``Deliver._held``), never below zero, summed over the account's destinations.
A fast account's pace lets it claim ahead past its share as it does past a destination's cap (those tasks
finish within ``control.delivery.ready.WINDOW_S``); a hanging destination has no pace and counts in full.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from control.db.leased import LeasedTask
from control.db.tasks import NO_ACCOUNT_CAP

__all__ = ("Accounts", "Shares")


class Accounts(msgspec.Struct, kw_only=True, frozen=True):
    """What one claim may take per account: none of a ``blocked`` one, at most ``room`` of those listed and
    ``per_account`` of any other."""

    blocked: Sequence[str] = ()
    room: Mapping[str, int] = msgspec.field(default_factory=dict)
    per_account: int = NO_ACCOUNT_CAP

    def less(self, claimed: Iterable[LeasedTask]) -> dict[str, int]:
        """The room per account left after ``claimed``."""
        left = dict(self.room)
        for task in claimed:
            left[task.account_id] = max(0, left.get(task.account_id, self.per_account) - 1)
        return left


class Shares:
    """Each destination's account, learnt from the tasks claimed for it, and the share one account may hold."""

    def __init__(self, *, concurrency: int, share: float) -> None:
        self.cap = max(1, math.floor(concurrency * share))
        """Tasks one account may hold in this worker (``deliver_account_share`` of ``deliver_concurrency``)."""
        self._account_of: dict[str, str] = {}

    def learn(self, tasks: Iterable[LeasedTask]) -> None:
        for task in tasks:
            self._account_of[task.destination_id] = task.account_id

    def forget(self, tracked: Iterable[str]) -> None:
        """Keeps the accounts of ``tracked`` destinations only (the sweep: those with nothing held or paced)."""
        keep = set(tracked)
        self._account_of = {d: a for d, a in self._account_of.items() if d in keep}

    def accounts(self, held: Mapping[str, int]) -> tuple[Accounts, list[str]]:
        """From what each destination holds (``Deliver._held``): the claim's limits per account, and the held
        destinations of accounts at their share (blocked like destinations at their cap, so that a claim is
        skipped when only they had room: ``Deliver._step``)."""
        per_account: Counter[str] = Counter()
        for destination_id, n in held.items():
            account = self._account_of.get(destination_id)
            if account is not None and n > 0:
                per_account[account] += n
        full = {account for account, n in per_account.items() if n >= self.cap}
        room = {account: self.cap - n for account, n in per_account.items() if account not in full}
        destinations = [d for d in held if self._account_of.get(d) in full] if full else []
        return Accounts(blocked=sorted(full), room=room, per_account=self.cap), destinations
