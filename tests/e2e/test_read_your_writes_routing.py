"""Read-your-writes for routing, through real processes (control, edge, flush worker): an event sent right
after a rule or destination change answered 2xx is routed under that change, every time.

"Routed" is read where the flush decides it: the delivery tasks committed with the event (no deliver worker
runs, so they stay as routing made them).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from shared.settings import Settings
from tests.conftest import Account
from tests.stack import Stack

pytestmark = pytest.mark.slow

ROUNDS = 20
NOWHERE = "http://127.0.0.1:9/hook"  # never called: no deliver worker runs


class Api:
    def __init__(self, stack: Stack, headers: dict[str, str], database_url: str) -> None:
        self.http = httpx.Client(base_url=stack.control_url, headers=headers, timeout=10)
        self.database_url = database_url

    def call(self, method: str, path: str, status: int, **kw: Any) -> dict[str, Any]:
        resp = self.http.request(method, path, **kw)
        assert resp.status_code == status, resp.text
        return resp.json()

    def send(self, endpoint: dict[str, Any], body: bytes) -> str:
        resp = httpx.post(endpoint["ingest_url"], content=body, headers={"content-type": "application/json"})
        assert resp.status_code == 200, resp.text
        return resp.json()["id"]

    async def routes(self, event_ids: list[str], timeout_s: float = 20) -> dict[str, set[tuple[str, str]]]:
        """event id → {(rule id, destination id)} of its delivery tasks, once every event is stored."""
        deadline = time.monotonic() + timeout_s
        for event_id in event_ids:
            while self.http.get(f"/v1/events/{event_id}").status_code != 200:
                assert time.monotonic() < deadline, f"event {event_id} not stored within {timeout_s}s"
                time.sleep(0.02)
        conn = await asyncpg.connect(self.database_url)
        try:
            rows = await conn.fetch(
                "SELECT event_id, rule_id, destination_id FROM delivery_tasks WHERE event_id = any($1::text[])",
                event_ids,
            )
        finally:
            await conn.close()
        routed: dict[str, set[tuple[str, str]]] = {e: set() for e in event_ids}
        for row in rows:
            routed[row["event_id"]].add((row["rule_id"], row["destination_id"]))
        return routed


@pytest.fixture
async def api(shared_stack: tuple[Stack, Account], module_settings: Settings) -> AsyncIterator[Api]:
    """One stack for the module (its tests each work on endpoints of their own account)."""
    stack, account = shared_stack
    client = Api(stack, account.headers, module_settings.database_url)
    try:
        yield client
    finally:
        client.http.close()


async def test_a_rule_created_is_in_force_for_the_next_event(api: Api) -> None:
    """Alternately a destination created with forward_all (its rule with it) and a condition rule, each
    followed at once by an event it must route; the worker is warm (it cached the rules before each change)."""
    made = api.call("POST", "/v1/endpoints", 201, json={"name": "ryw-routing"})
    shared = api.call("POST", f"/v1/endpoints/{made['id']}/destinations", 201, json={"url": NOWHERE})
    expected: dict[str, tuple[str, str]] = {}
    warmups: list[str] = []
    for i in range(ROUNDS):
        warmups.append(api.send(made, b'{"n":-1}'))  # routed under the rules before the change
        if i % 2 == 0:
            created = api.call(
                "POST", f"/v1/endpoints/{made['id']}/destinations", 201, json={"url": NOWHERE, "forward_all": True}
            )
            pair = (created["rule"]["id"], created["id"])
        else:
            tree = {"op": "AND", "children": [{"field": "body.n", "operator": "equals", "value": str(i)}]}
            rule = api.call(
                "POST",
                f"/v1/endpoints/{made['id']}/rules",
                201,
                json={"name": f"n is {i}", "condition_tree": tree, "destination_ids": [shared["id"]]},
            )
            pair = (rule["id"], shared["id"])
        expected[api.send(made, b'{"n":%d}' % i)] = pair
    routed = await api.routes([*expected, *warmups])
    missed = [event_id for event_id, pair in expected.items() if pair not in routed[event_id]]
    assert not missed, f"{len(missed)} of {ROUNDS} events sent right after a rule was created were not routed by it"


async def test_a_rule_deactivated_or_a_destination_deleted_is_out_of_force_for_the_next_event(api: Api) -> None:
    """Each event is sent right after a change answered; its routing is read before the next change (an
    event sent before a change may be routed under either side of it)."""
    made = api.call("POST", "/v1/endpoints", 201, json={"name": "ryw-routing"})
    base = f"/v1/endpoints/{made['id']}"
    kept = api.call("POST", f"{base}/destinations", 201, json={"url": NOWHERE, "forward_all": True})
    kept_pair = (kept["rule"]["id"], kept["id"])

    async def routed_as(expected: set[tuple[str, str]]) -> None:
        event_id = api.send(made, b"{}")
        assert (await api.routes([event_id]))[event_id] == expected

    for _ in range(ROUNDS // 4):
        doomed = api.call("POST", f"{base}/destinations", 201, json={"url": NOWHERE, "forward_all": True})
        paused = api.call("POST", f"{base}/destinations", 201, json={"url": NOWHERE, "forward_all": True})
        doomed_pair, paused_pair = (doomed["rule"]["id"], doomed["id"]), (paused["rule"]["id"], paused["id"])
        await routed_as({kept_pair, doomed_pair, paused_pair})  # the worker now caches all three
        api.call("PATCH", f"/v1/rules/{paused['rule']['id']}", 200, json={"active": False})
        await routed_as({kept_pair, doomed_pair})
        api.call("DELETE", f"/v1/destinations/{doomed['id']}", 200)
        await routed_as({kept_pair})
        api.call("PATCH", f"/v1/rules/{paused['rule']['id']}", 200, json={"active": True})
        await routed_as({kept_pair, paused_pair})
        api.call("PATCH", f"/v1/rules/{paused['rule']['id']}", 200, json={"active": False})
