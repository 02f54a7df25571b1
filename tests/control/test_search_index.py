"""`q` reads its trigram index on the server the tests run on, which is the embedded Postgres (no pg_trgm)
unless DATABASE_URL names another: the index is GIN's built-in array operator class over ``hy_search_keys``,
the trigrams prefixed by the endpoint's tag (ADR 0057). What a trigram is on the SQL side and on the Python side
must agree on any text, hostile included, or a search would miss what it should find."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from control.db import events as db_events
from control.db import partitions
from control.db.migrate import available, migrate
from control.service.events.read import event_filters
from tests.events_support import Ev, store
from tests.helpers import create_endpoint

_HOSTILE = (
    "Ünïcödé ß İstanbul 😀👍🏽 e\u0301 \x01a\x01bc\x01 tab\tnew\nline \\back\\slash 'quote' \"dq\" % _ "
    "<script>$(rm -rf /)</script> \ufffd 中文字符 x"
)

_FILLER = """
INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8, search_text)
SELECT 'evt_filler' || g, $1, $2::timestamptz + g * interval '1 second', 'POST', '{}'::jsonb, '', true,
       'filler ' || md5(g::text) FROM generate_series(1, 6000) g
"""


async def test_the_trigrams_of_any_part_of_a_text_are_among_the_texts(conn) -> None:
    endpoint = "ep_01M8YJMRAMTMHKA454XM43EEP3"
    indexed = set(await conn.fetchval("SELECT hy_search_keys($1, $2)", endpoint, _HOSTILE.lower()))
    tag = db_events.endpoint_tag(endpoint)
    assert tag == await conn.fetchval("SELECT left(md5($1), 6)", endpoint)
    text = _HOSTILE.lower()
    for size in range(1, 9):
        for start in range(len(text) - size + 1):
            part = text[start : start + size]
            assert {tag + g for g in db_events.query_grams(part)} <= indexed, part
    # every key asked for is 9 characters; what a U+0001 splits off, and each pass's tail, is shorter
    assert all(len(k) < 9 or (k.startswith(tag) and "\x01" not in k) for k in indexed)
    assert db_events.query_grams("ab") == []  # under 3 characters the index cannot help
    assert db_events.query_grams("a\x01bcd") == ["bcd"]  # U+0001 splits the SQL side's chunks


async def _index_scans(conn: asyncpg.Connection, index: str) -> int:
    return await conn.fetchval("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = $1", index) or 0


async def test_a_q_page_reads_the_index_on_this_server(client, account, conn) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    yday = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    await partitions.ensure_ahead(conn, days_back=1, days_ahead=1)
    await conn.execute(_FILLER, endpoint, yday)
    rare = Ev(endpoint, received_at=yday + timedelta(minutes=7), body=f'{{"note": "{_HOSTILE}"}}'.encode())
    # matches among the newest 2,000 rows (the walk's) and older (the index's): a page joins both, in order
    pins = [Ev(endpoint, received_at=yday + timedelta(minutes=m), body=b'{"pin": "Pin-X"}') for m in (95, 80, 30, 5)]
    await store(conn, None, None, [rare, *pins])
    assert f"events_{yday:%Y%m%d}" in await partitions.index_finished_days(conn)
    await conn.execute("ANALYZE events")
    index = f"events_{yday:%Y%m%d}_keys"
    definition = await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", index)
    assert "hy_search_keys" in definition, definition
    assert "gin_trgm_ops" not in definition

    # a trigram in most of the endpoint's rows (`fil`: every filler) is left out of the index condition, a rare
    # one kept; an endpoint without rows that day has none frequent
    assert await db_events.frequent_grams(conn, endpoint, ["fil", "ler", "ist", "zzz"]) == {"fil", "ler"}
    assert await db_events.frequent_grams(conn, "ep_elsewhere", ["fil", "ler"]) == set()
    tag = db_events.endpoint_tag(endpoint)
    kept = db_events.search_statements(
        endpoint, event_filters(q="filler İst"), limit=20, after=None, bounds=[], frequent={"fil", "ill", "lle", "ler"}
    )[1].args[-1]
    assert tag + "fil" not in kept
    assert tag + "İst".lower()[:3] in kept
    everyone = db_events.search_statements(
        endpoint, event_filters(q="filler"), limit=20, after=None, bounds=[], frequent={"fil", "ill", "lle", "ler"}
    )[1].args[-1]
    assert everyone == [tag + g for g in ("fil", "ill", "ler", "lle")]  # all frequent: all asked, as with no stats

    # the statement a page runs after its walk found the page short: the planner picks the index
    filters = event_filters(q="İstanbul 😀")
    indexed, args = db_events.search_statements(endpoint, filters, limit=20, after=None, bounds=[])[1].statement(0, 20)
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN {indexed}", *args))
    assert f"Bitmap Index Scan on {index}" in plan, plan

    # and through the API: every q below finds the event, by the index (its scan count grows) where it has a
    # trigram without U+0001 (all but one), by the scan of the day where not
    before = await _index_scans(conn, index)
    asked = ("İSTANBUL 😀", "a\x01bc", "<script>$(rm", '"dq" % _', "\\back\\", "中文字")
    assert [bool(db_events.query_grams(q.lower())) for q in asked] == [True, False, True, True, True, True]
    for q in asked:
        resp = await client.get(f"/v1/endpoints/{endpoint}/events", params={"q": q}, headers=account.headers)
        assert resp.status_code == 200, resp.text
        assert [e["id"] for e in resp.json()["events"]] == [rare.id], q
    for limit in (1, 3, 20):
        seen, cursor = [], None
        while True:
            params = {"q": "pin-x", "limit": limit} | ({"cursor": cursor} if cursor else {})
            resp = await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)
            seen += [e["id"] for e in resp.json()["events"]]
            if (cursor := resp.json()["next_cursor"]) is None:
                break
        assert seen == [p.id for p in pins], limit
    params = {"q": "filler", "limit": 20}
    resp = await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)
    assert len(resp.json()["events"]) == 20  # a common term fills the page from the walk alone
    deadline = time.monotonic() + 15  # the statistics of other sessions arrive within about a second
    while (scans := await _index_scans(conn, index)) < before + 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert scans >= before + 5, (before, scans)


@contextlib.asynccontextmanager
async def _made_before(
    empty_database: str, monkeypatch: pytest.MonkeyPatch, version: str
) -> AsyncIterator[tuple[asyncpg.Connection, str, Ev, Callable[[], Awaitable[None]]]]:
    """A database migrated up to ``version`` (left out), with two events in yesterday's partition, one holding
    `cus_Upgraded`: (a connection, that partition, that event, the upgrade applying ``version`` and the rest)."""
    shipped = available()
    monkeypatch.setattr("control.db.migrate.available", lambda: [m for m in shipped if m[0] < version])
    assert all(applied < version for applied in await migrate(empty_database))
    conn = await asyncpg.connect(empty_database)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")

    async def upgrade() -> None:
        monkeypatch.setattr("control.db.migrate.available", lambda: shipped)
        assert await migrate(empty_database) == [m[0] for m in shipped if m[0] >= version]  # it and what came after

    try:
        yday = datetime.now(UTC).replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)
        await partitions.ensure_ahead(conn, days_back=1, days_ahead=1)
        old = Ev("ep_upgraded", received_at=yday, body=b'{"customer": "cus_Upgraded"}')
        await store(conn, None, None, [old, Ev("ep_upgraded", received_at=yday, body=b"{}")])
        yield conn, f"events_{yday:%Y%m%d}", old, upgrade
    finally:
        await conn.close()


async def test_a_database_made_before_0036_gets_the_index_and_keeps_its_answers(empty_database, monkeypatch) -> None:
    """An existing data directory upgraded: its finished days had no `q` index (no pg_trgm) or a pg_trgm one;
    0036 adds the function, `q` answers at once (reading the day), and the same once the sweep built the index."""
    async with _made_before(empty_database, monkeypatch, "0036") as (conn, day, old, upgrade):
        filters = event_filters(q="CUS_UPGRADED")
        await upgrade()
        unindexed = [r["id"] for r in await db_events.page(conn, "ep_upgraded", filters, limit=20)]
        assert day in await partitions.index_finished_days(conn)
        indexed = [r["id"] for r in await db_events.page(conn, "ep_upgraded", filters, limit=20)]
        assert unindexed == indexed == [old.id]


_WORDS = """
INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8, search_text)
SELECT 'evt_' || $3 || g, $1, $2::timestamptz + g * interval '1 second', 'POST', '{}'::jsonb, '', true,
       $3 || ' ' || md5(g::text) FROM generate_series(1, $4::int) g
"""


def _bitmap_rows(plan: dict) -> list[int]:
    """The rows each Bitmap Index Scan of an EXPLAIN (ANALYZE, FORMAT JSON) plan returned."""
    found = [plan["Actual Rows"]] if plan["Node Type"] == "Bitmap Index Scan" else []
    return found + [n for child in plan.get("Plans", []) for n in _bitmap_rows(child)]


async def test_a_page_reads_only_its_own_endpoints_part_of_the_index(client, account, conn) -> None:
    """The index's keys carry the endpoint, so a term another endpoint holds costs this one's page nothing: the
    bitmap holds none of the other's matches (with trigrams alone it held all 400 of them, then the heap
    rejected them one by one, so the read grew with every endpoint's matches, not the page's own)."""
    mine = (await create_endpoint(client, account.headers))["id"]
    other = (await create_endpoint(client, account.headers))["id"]
    yday = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    await partitions.ensure_ahead(conn, days_back=1, days_ahead=1)
    await conn.execute(_WORDS, mine, yday, "filler", 6000)
    await conn.execute(_WORDS, other, yday, "needle", 400)
    mine_needle = Ev(mine, received_at=yday + timedelta(hours=5), body=b'{"w": "a needle of mine"}')
    await store(conn, None, None, [mine_needle])
    await partitions.index_finished_days(conn)
    await conn.execute("ANALYZE events")

    for q, expected in (("needle", [mine_needle.id]), ("needle 1", [])):
        read = db_events.search_statements(mine, event_filters(q=q), limit=20, after=None, bounds=[])[1]
        indexed, args = read.statement(0, 20)
        async with conn.transaction():
            await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {indexed}", *args))[0]["Plan"]
            assert [r["id"] for r in await conn.fetch(indexed, *args)] == expected
        assert _bitmap_rows(plan) == [len(expected)], (q, plan)
        resp = await client.get(f"/v1/endpoints/{mine}/events", params={"q": q}, headers=account.headers)
        assert [e["id"] for e in resp.json()["events"]] == expected
    resp = await client.get(f"/v1/endpoints/{other}/events", params={"q": "needle 1"}, headers=account.headers)
    assert len(resp.json()["events"]) == 20  # the other endpoint's own page finds its own, by its own keys


async def test_a_database_made_before_0039_keeps_its_answers_while_the_sweep_rekeys_its_days(
    empty_database, monkeypatch
) -> None:
    """An existing data directory upgraded past 0039: its finished days hold the index of 0036 (trigrams alone),
    which no query asks for any more. `q` answers the same at once (reading the day), and the same once the
    sweep built the day's endpoint-keyed index and dropped the old one."""
    async with _made_before(empty_database, monkeypatch, "0039") as (conn, day, old, upgrade):
        grams = '(hy_search_grams(search_text) COLLATE "C")'  # the day's index as the sweep of 0036 built it
        await conn.execute(f'CREATE INDEX "{day}_search" ON "{day}" USING gin ({grams})')
        filters = event_filters(q="CUS_UPGRADED")
        await upgrade()
        unindexed = [r["id"] for r in await db_events.page(conn, "ep_upgraded", filters, limit=20)]
        assert day in await partitions.index_finished_days(conn)
        left = {r[0] for r in await conn.fetch("SELECT relname FROM pg_class WHERE relname LIKE $1", day + "_%")}
        assert f"{day}_keys" in left
        assert f"{day}_search" not in left  # the old kind dropped once the new one is valid
        rekeyed = [r["id"] for r in await db_events.page(conn, "ep_upgraded", filters, limit=20)]
        assert unindexed == rekeyed == [old.id]


def _relations(plan: dict) -> set[str]:
    """The tables an EXPLAIN (FORMAT JSON) plan reads: the partitions left after pruning while planning."""
    found = {plan["Relation Name"]} if "Relation Name" in plan else set()
    return found.union(*(_relations(child) for child in plan.get("Plans", [])))


async def _indexed_reads(conn: asyncpg.Connection, endpoint: str, q: str) -> tuple[list[str], list[set[str]]]:
    """A page of ``q`` read by ``events.page``: (its ids, the partitions each of its index statements planned)."""
    ran: list[tuple[str, tuple]] = []
    with conn.query_logger(lambda logged: ran.append((logged.query, logged.args))):
        found = [r["id"] for r in await db_events.page(conn, endpoint, event_filters(q=q), limit=20)]
    planned = []
    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        for sql, args in ((sql, args) for sql, args in ran if "@>" in sql):  # the statements of the keys
            plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args))[0]["Plan"]
            planned.append(_relations(plan))
    return found, planned


async def test_a_page_plans_only_the_days_it_reads(client, account, conn) -> None:
    """The indexed read runs its days newest first, a statement at a time, and stops at the one that fills the
    page: that page plans the days it read and not the forty older ones (one statement with an arm a day planned
    every day: the plan grew with retention, ~0.2 ms a day). A term in no row runs every day, but their arms
    double in length, a statement per doubling; the answers stay every match, newest first, page after page."""
    endpoint = (await create_endpoint(client, account.headers))["id"]
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = [today - timedelta(days=n) for n in (1, 2, 3)]
    await partitions.ensure_ahead(conn, days_back=40, days_ahead=1)
    needles = [
        Ev(endpoint, received_at=day + timedelta(minutes=10 * i), body=f'{{"w": "needle {i}"}}'.encode())
        for day in days
        for i in range(25)
    ]
    await store(conn, None, None, needles)
    await conn.execute(_WORDS, endpoint, today, "fillert", 2100)  # the walk's 2,000 rows: today's, no needle
    for day in days:
        await conn.execute(_WORDS, endpoint, day + timedelta(hours=5), f"filler{day:%d}", 800)
    assert {f"events_{d:%Y%m%d}" for d in days} <= set(await partitions.index_finished_days(conn))
    await conn.execute("ANALYZE events")
    newest = sorted(needles, key=lambda e: (e.received_at, e.id), reverse=True)

    found, planned = await _indexed_reads(conn, endpoint, "needle")
    assert found == [e.id for e in newest[:20]]
    assert set().union(*planned) == {f"events_{today:%Y%m%d}", f"events_{days[0]:%Y%m%d}"}, planned
    assert len(planned) == 2  # today (read past the walk), then yesterday, which fills the page

    bounds = await db_events.search_bounds(conn)
    assert len(bounds) > 40
    found, planned = await _indexed_reads(conn, endpoint, "no such needle")
    assert found == []
    assert len(set().union(*planned)) > 40  # every day read
    assert len(planned) <= len(bounds).bit_length() + 2, planned  # in log2(days) statements, not one a day

    for limit in (7, 20, 30):  # pages that end inside a day and across days: every match, in order
        seen, cursor = [], None
        while True:
            params = {"q": "NEEDLE", "limit": limit} | ({"cursor": cursor} if cursor else {})
            resp = await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)
            assert resp.status_code == 200, resp.text
            seen += [e["id"] for e in resp.json()["events"]]
            if (cursor := resp.json()["next_cursor"]) is None:
                break
        assert seen == [e.id for e in newest], limit
