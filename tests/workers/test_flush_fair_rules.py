"""One account's regex rules against another's events in the shared flush (ADR 0094): a hostile tenant B with
the heaviest tree the API takes and near-limit bodies beside a normal tenant A, whose events must be stored and
routed promptly. Before the bound, B's 55 patterns of ~1,000 characters ran over every 900 KB body inside the
batch A's events waited in (a fresh-clone trial: A's events stored 13.8 s late, nothing for 2 minutes at 200
bodies)."""

from __future__ import annotations

import asyncio
import json
import random
import string
import time
from typing import Any

from control.db.context import Context
from control.routing.conditions import EventView, InvalidConditionTree, compile_tree, validate
from control.workers.flush import Flush
from tests.conftest import ingest_record
from tests.destination import Destination, add_destination, add_endpoint, add_rule, running
from tests.workers.conftest import drain, xadd

_random = random.Random(94)


def _words(n: int, length: int) -> list[str]:
    return ["".join(_random.choice(string.ascii_lowercase) for _ in range(length)) for _ in range(n)]


def _pattern() -> str:
    """~1,000 characters of alternated literals, as in the trial: RE2 keeps its DFA, yet scans every byte."""
    return "(?:" + "|".join(_words(76, 12)) + ")"


def _heaviest_accepted(leaves: list[dict[str, Any]]) -> dict[str, Any]:
    """What B can store: the whole OR, or, refused, the longest prefix the write check takes. The refusal names
    the leaf whose pattern crossed the budget (the /v1 and MCP writes call this same check)."""
    tree = {"op": "OR", "children": leaves}
    try:
        return validate(tree)
    except InvalidConditionTree as exc:
        message = str(exc)
        assert message.startswith("condition_tree.children[")
        assert ".value: the tree's patterns compile" in message
        refused = int(message.split("[", 1)[1].split("]", 1)[0])
        assert refused >= 1
        return validate({"op": "OR", "children": leaves[:refused]})


def _big_body(i: int) -> bytes:
    """900 KB that Postgres compresses well (random text took it 0.4 s per body to store, beside the rules'
    cost: ADR 0094); RE2 scans it byte by byte all the same."""
    blob = " ".join(_words(20, 8)) * 5000
    return json.dumps({"type": "b.big", "i": i, "blob": blob[:900_000]}).encode()


async def test_a_hostile_tenants_regex_rule_does_not_hold_anothers_events(
    ctx: Context, destination: Destination
) -> None:
    """The flush lane and the deliver loop share one event loop, as in ``hookyard worker``."""
    async with ctx.pool.acquire() as conn:
        a_endpoint = await add_endpoint(conn)
        a_rule = await add_rule(conn, a_endpoint, [await add_destination(conn, a_endpoint, destination.url)])
        b_endpoint = await add_endpoint(conn)
        b_tree = _heaviest_accepted([{"field": "body", "operator": "regex", "value": _pattern()} for _ in range(55)])
        await add_rule(conn, b_endpoint, [await add_destination(conn, b_endpoint, "http://127.0.0.1:9/b")], b_tree)
    flush = Flush(ctx, consumer="fair", block_ms=5, claim_every_s=0, count=64)
    await flush.ensure_groups()
    try:
        await xadd(ctx, [ingest_record(a_endpoint)])  # warm: the lane's groups, A's rules cached
        await drain(flush)
        bodies = [_big_body(i) for i in range(12)]
        for body in bodies:  # as the edge batches them: B's bodies queued first, A's two events behind them
            await xadd(ctx, [ingest_record(b_endpoint, body)])
        a_events = [ingest_record(a_endpoint, b'{"type":"a.normal"}') for _ in range(2)]
        await xadd(ctx, a_events)
        a_ids = {e.id for e in a_events}
        async with running(ctx):
            began = time.monotonic()
            draining = asyncio.ensure_future(drain(flush))
            stored_after = delivered_after = None
            while delivered_after is None and time.monotonic() - began < 60:
                if stored_after is None:
                    async with ctx.pool.acquire() as conn:
                        routed = await conn.fetchval(
                            "SELECT count(*) FROM delivery_tasks WHERE rule_id = $1 AND event_id = ANY($2::text[])",
                            a_rule,
                            list(a_ids),
                        )
                    if routed == len(a_ids):
                        stored_after = time.monotonic() - began
                if a_ids <= {r.headers.get("x-hookyard-event-id") for r in destination.requests}:
                    delivered_after = time.monotonic() - began
                else:
                    await asyncio.sleep(0.02)
            await draining
    finally:
        await flush.close()
    # Stored with their tasks and delivered in the same batch as B's bodies: the batch's cost is COPYing
    # 11 MB (~0.5 s), not B's rules (the old code's batch took 6.0 s: their patterns on every body).
    assert stored_after is not None
    assert stored_after < 3.0, stored_after
    assert delivered_after is not None
    assert delivered_after < 3.5, delivered_after
    async with ctx.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", b_endpoint) == 12


def test_the_costliest_tree_the_write_check_takes_is_cheap_on_a_body_at_the_limit() -> None:
    """Patterns RE2 runs as an NFA (its DFA gives up on them): ~1.2 ns per instruction and character. Before the
    bound a 30-alternative one took 3 s on a 900 KB body; the tree here is cut where the write check refuses."""
    pieces = [f"{_random.choice('abc')}.{{0,30}}{_random.choice('xyz')}" for _ in range(6)]
    leaves = [{"field": "body.s", "operator": "regex", "value": f"(?:{'|'.join(pieces)})9"} for _ in range(8)]
    predicate = compile_tree(_heaviest_accepted(leaves))
    event = EventView(body={"s": "".join(_random.choice(string.ascii_lowercase) for _ in range(1_000_000))})
    began = time.perf_counter()
    assert predicate(event) is False
    assert time.perf_counter() - began < 0.2
