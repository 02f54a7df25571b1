"""A stored path keeps its leading slash (``/stripe``; ``/`` for the bare ingest URL), from
the edge through the flush to the API, routing on ``meta.path``, and what migration 0017 does to rows and
rules written in the old form (``stripe``, ``""``).

The edge and the flush run in this process on the test's Redis and database (the real ``EdgeApp`` and
``Flush``); the endpoint, destination and rule are made through the API, as a user makes them.
"""

from __future__ import annotations

from importlib import resources
from urllib.parse import urlsplit

import httpx
from litestar.testing import AsyncTestClient

from control.db import connect
from control.db.context import Context
from control.workers.flush import Flush
from edge.app import create_app as create_edge
from shared.settings import Settings
from tests.conftest import Account
from tests.destination import add_endpoint, add_rule
from tests.events_support import Ev, store


async def _ingest(settings: Settings, ingest_url: str, paths: list[str]) -> dict[str, str]:
    """Each path (after the ingest URL) sent to the real edge app; the event id it acknowledged → the path."""
    edge = create_edge(settings)
    await edge.startup()
    acked: dict[str, str] = {}
    try:
        transport = httpx.ASGITransport(app=edge)
        async with httpx.AsyncClient(transport=transport, base_url="http://edge.test") as sender:
            base = urlsplit(ingest_url).path
            for path in paths:
                resp = await sender.post(base + path, json={"type": "invoice.paid"})
                assert resp.status_code == 200, resp.text
                acked[resp.json()["id"]] = path
    finally:
        await edge.shutdown()
    return acked


async def test_the_path_keeps_its_slash_from_the_edge_to_the_api_and_routing(
    settings: Settings, ctx: Context, client: AsyncTestClient, account: Account
) -> None:
    endpoint = (await client.post("/v1/endpoints", json={"name": "paths"}, headers=account.headers)).json()
    ep = endpoint["id"]
    only_stripe = {"op": "AND", "children": [{"field": "meta.path", "operator": "equals", "value": "/stripe"}]}
    made = await client.post(
        f"/v1/endpoints/{ep}/destinations",
        json={"url": "http://127.0.0.1:9/hooks", "condition_tree": only_stripe},
        headers=account.headers,
    )
    assert made.status_code == 201, made.text

    acked = await _ingest(settings, endpoint["ingest_url"], ["/stripe", "", "/", "//double", "/a/b%2Fc"])
    flush = Flush(ctx, consumer="paths", block_ms=5, claim_every_s=0)
    await flush.ensure_groups()
    while await flush.step():
        pass
    await flush.close()

    expected = {"/stripe": "/stripe", "": "/", "/": "/", "//double": "//double", "/a/b%2Fc": "/a/b%2Fc"}
    for event_id, sent in acked.items():
        event = (await client.get(f"/v1/events/{event_id}", headers=account.headers)).json()
        assert event["path"] == expected[sent], (sent, event["path"])
    async with ctx.pool.acquire() as conn:
        rows = await conn.fetch("SELECT event_id FROM delivery_tasks WHERE endpoint_id = $1", ep)
    routed = [row["event_id"] for row in rows]
    assert [acked[event_id] for event_id in routed] == ["/stripe"]


def _migration(version: str) -> str:
    return (resources.files("control.db") / "migrations" / f"{version}.sql").read_text(encoding="utf-8")


def _leaf(operator: str, value: object, field: str = "meta.path") -> dict[str, object]:
    return {"field": field, "operator": operator, "value": value}


async def test_migration_0017_gives_old_rows_and_rules_their_slash(database_url: str) -> None:
    """Rows and rule trees as the old flush and API left them, then the migration's SQL as shipped."""
    conn = await connect(database_url)
    try:
        endpoint_id = await add_endpoint(conn)
        old = {"stripe": "/stripe", "": "/", "a/b": "/a/b", "/x": "/x"}  # "/x": already slashed, left alone
        events = {path: Ev(endpoint_id, path=path) for path in old}
        await store(conn, None, None, events.values())
        tree = {
            "op": "OR",
            "children": [
                _leaf("equals", "stripe"),
                {"op": "AND", "children": [_leaf("not_equals", ""), _leaf("regex", "^str.*$")]},
                _leaf("regex", "ipe$"),
                _leaf("regex", "^/already"),
                _leaf("contains", "rip"),
                _leaf("exists", None),
                _leaf("equals", "/x"),
                _leaf("equals", 7),
                _leaf("equals", "stripe", field="meta.provider"),
            ],
        }
        untouched = {"op": "AND", "children": [_leaf("equals", "stripe", field="body.path")]}
        rule = await add_rule(conn, endpoint_id, [], tree)
        other = await add_rule(conn, endpoint_id, [], untouched)
        version = await conn.fetchval("SELECT config_version FROM endpoints WHERE id = $1", endpoint_id)

        await conn.execute(_migration("0017_event_paths_keep_slash"))

        stored = {r["id"]: r["path"] for r in await conn.fetch("SELECT id, path FROM events")}
        assert {path: stored[event.id] for path, event in events.items()} == old
        migrated = await conn.fetchval("SELECT condition_tree FROM rules WHERE id = $1", rule)
        assert migrated == {
            "op": "OR",
            "children": [
                _leaf("equals", "/stripe"),
                {"op": "AND", "children": [_leaf("not_equals", "/"), _leaf("regex", "^/str.*$")]},
                _leaf("regex", "ipe$"),
                _leaf("regex", "^/already"),
                _leaf("contains", "rip"),
                _leaf("exists", None),
                _leaf("equals", "/x"),
                _leaf("equals", 7),
                _leaf("equals", "stripe", field="meta.provider"),
            ],
        }
        assert await conn.fetchval("SELECT condition_tree FROM rules WHERE id = $1", other) == untouched
        # the flush reloads the endpoint's rules: its config version moved
        assert await conn.fetchval("SELECT config_version FROM endpoints WHERE id = $1", endpoint_id) > version
        assert await conn.fetchval("SELECT to_regprocedure('hy_slash_meta_path(jsonb)')") is None
    finally:
        await conn.close()
