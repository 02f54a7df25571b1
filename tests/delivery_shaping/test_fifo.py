"""FIFO ordering through real processes: events sent one after another to the edge, flushed and delivered
by two deliver workers, one of them killed mid-way and replaced, to a sink that fails every third event's
first attempt. Per ordering key, the sink's successful deliveries come in the order sent, one in flight at
a time, the keys in parallel, and the destination's stats count the deliveries waiting in line."""

from __future__ import annotations

import itertools
import json
import random
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.samples import sample
from shared.settings import Settings
from tests.delivery_shaping.support import Judging
from tests.destination import Received, Reply
from tests.helpers import create_endpoint, db, token_of, wait_for
from tests.stack import Stack

pytestmark = pytest.mark.slow

EVENTS = 90
KEYS = ("acme.example", "globex.example", "initech.example")
OK_S, FAILED_S = 0.05, 0.02
"""How long the sink takes to answer a success and a failure."""


class Ledger:
    """What the sink answered, in order: (key, seq, succeeded, received at)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answers: list[tuple[str, int, bool, float]] = []

    def judge(self, request: Received) -> Reply:
        body = json.loads(request.body)
        fails = request.headers["x-hookyard-delivery-attempt"] == "1" and body["seq"] % 3 == 2
        with self.lock:
            self.answers.append((body["shop"]["domain"], body["seq"], not fails, request.at))
        return Reply(status=500, delay_s=FAILED_S) if fails else Reply(delay_s=OK_S)


async def test_fifo_per_key_holds_through_failing_heads_two_workers_and_a_kill(
    settings: Settings, client: Any, account: Any, database_url: str, tmp_path: Path
) -> None:
    ledger = Ledger()
    sink = Judging(ledger.judge)
    sink.start()
    stack = Stack(
        settings,
        tmp_path,
        HOOKYARD_RETRY_SCHEDULE_S="0.2,0.2,0.2,0.2",
        HOOKYARD_DELIVER_LEASE_S="3",
        HOOKYARD_DELIVER_TIMEOUT_S="2",
        HOOKYARD_DELIVER_SWEEP_S="0.2",
        HOOKYARD_DELIVER_POLL_S="0.2",
    )
    try:
        stack.start_worker("w1", "flush", "deliver")
        stack.start_worker("w2", "deliver")
        stack.start_edge()
        endpoint = await create_endpoint(client, account.headers)
        created = await client.post(
            f"/v1/endpoints/{endpoint['id']}/destinations",
            json={"url": sink.url, "forward_all": True, "ordering": "fifo", "ordering_key": "body.shop.domain"},
            headers=account.headers,
        )
        assert created.status_code == 201, created.text
        destination_id = created.json()["id"]
        ingest = f"{stack.edge_url}/h/{token_of(endpoint['ingest_url'])}"
        rng = random.Random(27)
        sent = [(rng.choice(KEYS), seq) for seq in range(EVENTS)]
        waiting_seen: list[int] = []

        async def waiting() -> int:
            got = await client.get(f"/v1/destinations/{destination_id}", headers=account.headers)
            return got.json()["health"]["fifo_waiting"]

        async with httpx.AsyncClient() as provider:
            for key, seq in sent:
                body = {"seq": seq, "shop": {"domain": key}}
                ack = await provider.post(ingest, json=body)
                assert ack.status_code == 200, ack.text
                if seq == EVENTS // 2:
                    waiting_seen.append(await waiting())
                    await sink.wait_for(20, timeout=30)
                    stack.kill("w2", signal.SIGKILL)  # mid-way: whatever it held comes back after its lease
                    stack.start_worker("w3", "deliver")

        async def finished() -> bool:
            waiting_seen.append(await waiting())
            async with db(database_url) as conn:
                done = await conn.fetchval("SELECT count(*) FROM delivery_tasks WHERE status = 'succeeded'")
            return done == EVENTS

        await wait_for(finished, timeout=90, interval=0.1)
    finally:
        stack.stop_all()
        sink.stop()

    answers = list(ledger.answers)
    for key in KEYS:
        of_key = [a for a in answers if a[0] == key]
        delivered = [seq for _, seq, ok, _ in of_key if ok]
        # A request answered after its worker died is sent again once the lease runs out: at once after
        # itself, since nothing behind it went meanwhile. Otherwise each event once, in the order sent.
        collapsed = [seq for i, seq in enumerate(delivered) if i == 0 or delivered[i - 1] != seq]
        assert collapsed == [seq for k, seq in sent if k == key], key
        for earlier, later in itertools.pairwise(of_key):  # one in flight per key
            assert later[3] - earlier[3] >= (OK_S if earlier[2] else FAILED_S) - 0.005, (key, earlier, later)
    assert sum(1 for _, seq, ok, _ in answers if not ok) >= EVENTS // 3 - 1  # every third first attempt failed
    overlapping = any(
        0 <= b[3] - a[3] < (OK_S if a[2] else FAILED_S) for a, b in itertools.pairwise(answers) if a[0] != b[0]
    )
    assert overlapping, "no two keys were ever in flight together"
    assert max(waiting_seen) > 0
    assert waiting_seen[-1] == 0


async def test_a_line_moves_on_as_soon_as_its_head_is_recorded_or_skipped(
    settings: Settings, client: Any, account: Any, tmp_path: Path
) -> None:
    """Only the poll woke the deliver loop once a head's result was committed (the send's end, which does wake
    it, comes before the commit), or once a head was skipped as a duplicate, so a line went a poll per delivery
    (about one a second). With a 5 s poll, a line of 20 with a provider's resend in it now goes in well under
    one."""
    sink = Judging(lambda _request: Reply())
    sink.start()
    stack = Stack(settings, tmp_path, HOOKYARD_DELIVER_POLL_S="5")
    try:
        stack.start_worker("worker", "flush", "deliver")
        stack.start_edge()
        endpoint = await create_endpoint(client, account.headers)
        created = await client.post(
            f"/v1/endpoints/{endpoint['id']}/destinations",
            json={"url": sink.url, "forward_all": True, "ordering": "fifo", "deduplicate_window_s": 3600},
            headers=account.headers,
        )
        assert created.status_code == 201, created.text
        ingest = f"{stack.edge_url}/h/{token_of(endpoint['ingest_url'])}"
        # Signed, so attributed to the provider, whose body id is the idempotency key (not checked: no secret set).
        webhooks = [sample("payments", "invoice.paid", secret="whsec_fifo", seed=seq) for seq in range(20)]
        webhooks.insert(1, webhooks[0])  # the provider sent the first one twice
        async with httpx.AsyncClient() as provider:
            for webhook in webhooks:
                assert (await provider.post(ingest, content=webhook.body, headers=webhook.headers)).status_code == 200
        await sink.wait_for(20, timeout=4)
    finally:
        stack.stop_all()
        sink.stop()
    unique = [webhooks[0], *webhooks[2:]]
    assert [r.body for r in sink.requests] == [w.body for w in unique]


async def test_a_fifo_destination_gone_then_enabled_sends_its_held_line_in_order(
    settings: Settings, client: Any, account: Any, tmp_path: Path
) -> None:
    """A 410 disables the destination and holds its line; events routed meanwhile are held behind it; on
    enable the held head goes first and the rest follow in the order they were sent (issue 46)."""
    gone = threading.Event()
    gone.set()
    sink = Judging(lambda _request: Reply(status=410) if gone.is_set() else Reply())
    sink.start()
    stack = Stack(settings, tmp_path, HOOKYARD_DELIVER_POLL_S="0.2")
    try:
        stack.start_worker("worker", "flush", "deliver")
        stack.start_edge()
        endpoint = await create_endpoint(client, account.headers)
        created = await client.post(
            f"/v1/endpoints/{endpoint['id']}/destinations",
            json={"url": sink.url, "forward_all": True, "ordering": "fifo"},
            headers=account.headers,
        )
        assert created.status_code == 201, created.text
        destination = f"/v1/destinations/{created.json()['id']}"
        ingest = f"{stack.edge_url}/h/{token_of(endpoint['ingest_url'])}"
        webhooks = [sample("payments", "invoice.paid", secret="whsec_fifo", seed=seq) for seq in range(6)]
        async with httpx.AsyncClient() as provider:
            assert (await provider.post(ingest, content=webhooks[0].body, headers=webhooks[0].headers)).is_success

            async def disabled() -> bool:
                return (await client.get(destination, headers=account.headers)).json()["state"] == "disabled"

            await wait_for(disabled, timeout=20)
            for webhook in webhooks[1:]:
                assert (await provider.post(ingest, content=webhook.body, headers=webhook.headers)).is_success

        async def all_held() -> bool:
            async with db(settings.database_url) as conn:
                held = await conn.fetchval(
                    "SELECT count(*) FROM delivery_tasks WHERE destination_id = $1 AND status = 'held'",
                    created.json()["id"],
                )
            return held == len(webhooks)

        await wait_for(all_held, timeout=20)
        assert len(sink.requests) == 1  # nothing sent while disabled
        gone.clear()
        enabled = await client.post(f"{destination}/enable", headers=account.headers)
        assert enabled.status_code == 200, enabled.text
        await sink.wait_for(1 + len(webhooks), timeout=20)
    finally:
        stack.stop_all()
        sink.stop()
    assert [r.body for r in sink.requests[1:]] == [w.body for w in webhooks]
