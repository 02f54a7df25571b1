"""What the flush worker reads from rules: stored trees compile into its predicates, every change bumps
the config version, and races between writes keep rules and destinations consistent."""

from __future__ import annotations

import asyncio

from control.routing import EventView, compile_tree
from control.service.rules import MAX_RULES
from shared import ids
from tests.control.rules.support import EVERYTHING, NORMALISED, create, created, list_path, listed, setup
from tests.helpers import concurrent_client, config_version, db


async def test_stored_trees_compile_into_the_predicates_the_flush_worker_runs(client, account, database_url):
    made, (d0, _) = await setup(client, account)
    rule = await created(client, account, made, destination_ids=[d0])
    everything = await created(client, account, made, condition_tree=EVERYTHING, destination_ids=[d0])
    async with db(database_url) as conn:
        stored = dict(await conn.fetch("SELECT id, condition_tree FROM rules WHERE endpoint_id = $1", made["id"]))
    assert stored == {rule["id"]: NORMALISED, everything["id"]: EVERYTHING}
    paid = EventView(body={"type": "invoice.paid", "amount": 2000}, headers={}, meta={})
    topic = EventView(body={"type": "invoice.paid"}, headers={"x-shop-topic": "orders/create"}, meta={})
    other = EventView(body={"type": "invoice.created"}, headers={"x-shop-topic": "t"}, meta={})
    assert [compile_tree(stored[rule["id"]])(e) for e in (paid, topic, other)] == [True, True, False]
    assert [compile_tree(stored[everything["id"]])(e) for e in (paid, topic, other)] == [True, True, True]


async def test_every_change_bumps_the_config_version(client, account, database_url):
    """What flush workers check per batch (instead of a message): every committed change moves it, refused
    writes and empty patches do not."""
    made, (d0, d1) = await setup(client, account)
    seen = [await config_version(database_url, made["id"])]

    async def moved() -> bool:
        seen.append(await config_version(database_url, made["id"]))
        return seen[-1] > seen[-2]

    rule = await created(client, account, made, destination_ids=[d0])
    assert await moved()
    path = f"/v1/rules/{rule['id']}"
    for change in ({"active": False}, {"condition_tree": EVERYTHING}, {"destination_ids": [d1]}, {"name": "n"}):
        assert (await client.patch(path, json=change, headers=account.headers)).status_code == 200
        assert await moved(), change
    assert (await client.delete(path, headers=account.headers)).status_code == 200
    assert await moved()
    bad_tree = {"op": "AND", "children": [{"field": "x", "operator": "exists"}]}
    assert (
        await create(client, account, made, name="x", condition_tree=bad_tree, destination_ids=[d0])
    ).status_code == 400
    assert not await moved()
    kept = await created(client, account, made, destination_ids=[d0])
    assert await moved()
    assert (await client.patch(f"/v1/rules/{kept['id']}", json={}, headers=account.headers)).status_code == 200
    assert (
        await client.patch(f"/v1/rules/{kept['id']}", json={"condition_tree": []}, headers=account.headers)
    ).status_code == 400
    assert not await moved()


async def test_a_rule_never_points_at_a_deleted_destination(settings, account):
    """Creating rules on a destination while it is deleted: each create either fails with 400 or its rule
    is deleted with the destination; no rule is ever left without destinations."""
    async with concurrent_client(settings) as c:
        made, (keep, doomed) = await setup(c, account)
        body = {"name": "race", "condition_tree": EVERYTHING, "destination_ids": [doomed]}
        both = {"name": "race2", "condition_tree": EVERYTHING, "destination_ids": [keep, doomed]}
        results = await asyncio.gather(
            *(c.post(list_path(made), json=body, headers=account.headers) for _ in range(5)),
            c.delete(f"/v1/destinations/{doomed}", headers=account.headers),
            *(c.post(list_path(made), json=both, headers=account.headers) for _ in range(5)),
        )
        assert results[5].status_code == 200
        assert all(r.status_code in (201, 400) for r in results[:5] + results[6:])
        deleted = set(results[5].json()["deleted_rule_ids"])
        survivors = await listed(c, account, made)
    for r in results[:5]:
        if r.status_code == 201:
            assert r.json()["id"] in deleted
    assert all(r["destination_ids"] == [keep] for r in survivors)
    assert {r["name"] for r in survivors} <= {"race2"}


async def test_patch_racing_delete_of_the_same_rule_is_200_or_404(settings, account):
    async with concurrent_client(settings) as c:
        made, (d0, d1) = await setup(c, account)
        for _ in range(3):
            rule = await created(c, account, made, destination_ids=[d0])
            patch, gone = await asyncio.gather(
                c.patch(f"/v1/rules/{rule['id']}", json={"destination_ids": [d1, d0]}, headers=account.headers),
                c.delete(f"/v1/rules/{rule['id']}", headers=account.headers),
            )
            assert gone.status_code == 200, gone.text
            assert patch.status_code in (200, 404), patch.text
        assert await listed(c, account, made) == []


async def test_concurrent_creates_respect_the_rule_cap(settings, account, database_url):
    async with concurrent_client(settings) as c:
        made, (d0, _) = await setup(c, account)
        async with db(database_url) as conn:
            await conn.executemany(
                "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ($1, $2, 'r', '{}'::jsonb)",
                [(ids.new_id("rule"), made["id"]) for _ in range(MAX_RULES - 3)],
            )
        body = {"name": "x", "condition_tree": EVERYTHING, "destination_ids": [d0]}
        results = await asyncio.gather(*(c.post(list_path(made), json=body, headers=account.headers) for _ in range(8)))
    assert sorted(r.status_code for r in results) == [201] * 3 + [400] * 5
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM rules WHERE endpoint_id = $1", made["id"]) == MAX_RULES
