"""Noisy neighbours in one deliver worker: a hostile account's transforms queued in the sandbox pool hold no
send slot, so another account's plain deliveries go at about their pace alone (issue 42)."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from control.db.context import Context
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, make_task, running, serving, settled
from tests.helpers import create_endpoint, wait_for

LOOP = "function handler(r) { for (;;) {} }"
"""Stopped at the 1 s limit, every call: its account's one sandbox process is busy for seconds."""
HOSTILE_DESTINATIONS = 3
PER_DESTINATION = 4
PLAIN = 12


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # Four send slots: the hostile account's twelve tasks would hold every one of them.
    return msgspec.structs.replace(
        settings, **{**FAST_DELIVERY, "deliver_lease_s": 60.0}, deliver_concurrency=4, sandbox_processes=2
    )


async def _plain_round(ctx: Context, url: str, endpoint: str, destination: str, sink) -> float:
    """Seconds until ``PLAIN`` new tasks of the plain destination succeeded."""
    before = len(sink.requests)
    tasks = [await make_task(ctx, url, endpoint_id=endpoint, destination_id=destination) for _ in range(PLAIN)]
    started = time.monotonic()
    await sink.wait_for(before + PLAIN, timeout=60)
    for made in tasks:
        await settled(ctx, made["task"], "succeeded")
    return time.monotonic() - started


async def _destination(client, account, url: str, transform: str | None) -> tuple[str, str]:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations", json={"url": url, "transform": transform}, headers=account.headers
    )
    assert resp.status_code == 201, resp.text
    return endpoint, resp.json()["id"]


async def test_queued_hostile_transforms_hold_no_send_slot_of_another_account(
    ctx: Context, client, account, other_account
) -> None:
    with serving() as hostile_sink, serving() as plain_sink:
        plain = await _destination(client, other_account, plain_sink.url, None)
        hostile = [
            await _destination(client, account, hostile_sink.url, f"{LOOP} // {i}") for i in range(HOSTILE_DESTINATIONS)
        ]
        async with running(ctx) as deliver:
            alone_s = await _plain_round(ctx, plain_sink.url, *plain, plain_sink)
            stuck = [
                await make_task(ctx, hostile_sink.url, endpoint_id=endpoint, destination_id=destination)
                for endpoint, destination in hostile
                for _ in range(PER_DESTINATION)
            ]
            # Every hostile task is claimed and in the pool before the plain ones are even written.
            await wait_for(lambda: asyncio.sleep(0, deliver.transforms.in_pool >= deliver.concurrency), timeout=10)
            beside_s = await _plain_round(ctx, plain_sink.url, *plain, plain_sink)
            assert deliver.transforms.in_pool > 0  # the hostile ones were still there all along
            failed = await settled(ctx, stuck[0]["task"], "failed", timeout=120)
    assert failed["last_error"] == "transform failed: stopped: still running after 1 s"
    assert hostile_sink.requests == []
    # Alone it takes a fraction of a second; held behind the runaways it took their seconds (12 s and more).
    assert beside_s < max(3 * alone_s, alone_s + 2.0), (alone_s, beside_s)
