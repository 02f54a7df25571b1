"""A transformed destination's backlog is not scanned for nothing: the deliver loop claims when something may
be claimable, not because a destination had room while it is blocked again (its account's deliveries crowd
the sandbox, or more of its sends started). In ``bench delivery`` a third of a transformed round's claims
found nothing after scanning that backlog, 8 ms of Postgres each (issue 42, ADR 0060)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from control.db.context import Context
from control.delivery.shares import Accounts
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, running, serving, settled
from tests.transform.backlog import transformed_backlog

TASKS = 150


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(
        settings,
        **{**FAST_DELIVERY, "deliver_poll_s": 5.0},
        deliver_concurrency=64,
        deliver_per_destination=4,
        sandbox_processes=2,
    )


async def test_no_claim_scans_a_blocked_backlog_for_nothing(ctx: Context) -> None:
    with serving() as sink:
        made = await transformed_backlog(ctx, sink.url, TASKS)
        async with running(ctx) as deliver:
            claims: list[tuple[int, bool]] = []  # (tasks claimed, whether destinations were left out)
            claim = deliver._claim

            async def counted(free: int, blocked: list[str], accounts: Accounts) -> Any:
                result = await claim(free, blocked, accounts)
                claims.append((len(result[0]), bool(blocked)))
                return result

            deliver._claim = counted  # type: ignore[method-assign]  # counts the real claims, on this instance only
            await settled(ctx, made[-1]["task"], "succeeded", timeout=60)
            for task in made:
                await settled(ctx, task["task"], "succeeded", timeout=30)
    scanned_for_nothing = [n for n, blocked in claims if blocked and n == 0]
    assert len(scanned_for_nothing) <= 2, claims
