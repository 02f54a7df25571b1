"""`q` reads its trigram index on the server the tests run on, which is the embedded Postgres (no pg_trgm)
unless DATABASE_URL names another: the index is GIN's built-in array operator class over ``hy_search_grams``
(ADR 0057). What a trigram is on the SQL side and on the Python side must agree on any text, hostile included,
or a search would miss what it should find."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import asyncpg

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
    indexed = set(await conn.fetchval("SELECT hy_search_grams($1)", _HOSTILE.lower()))
    text = _HOSTILE.lower()
    for size in range(1, 9):
        for start in range(len(text) - size + 1):
            part = text[start : start + size]
            assert set(db_events.query_grams(part)) <= indexed, part
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
    await store(conn, None, None, [rare])
    assert f"events_{yday:%Y%m%d}" in await partitions.index_finished_days(conn)
    await conn.execute("ANALYZE events")
    index = f"events_{yday:%Y%m%d}_search"
    definition = await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", index)
    assert "hy_search_grams" in definition, definition
    assert "gin_trgm_ops" not in definition

    # a trigram in most rows (`fil`: every filler) is left out of the index condition, a rare one kept
    assert await db_events.frequent_grams(conn, ["fil", "ler", "ist", "zzz"]) == {"fil", "ler"}
    kept = db_events.search_statements(
        endpoint, event_filters(q="filler İst"), limit=20, after=None, bounds=[], frequent={"fil", "ill", "lle", "ler"}
    )[1][1][-1]
    assert "fil" not in kept
    assert "İst".lower()[:3] in kept
    everyone = db_events.search_statements(
        endpoint, event_filters(q="filler"), limit=20, after=None, bounds=[], frequent={"fil", "ill", "lle", "ler"}
    )[1][1][-1]
    assert everyone == ["fil", "ill", "ler", "lle"]  # all frequent: all asked for, as without statistics

    # the statement a page runs after its walk found the page short: the planner picks the index
    filters = event_filters(q="İstanbul 😀")
    _, (indexed, args) = db_events.search_statements(endpoint, filters, limit=20, after=None, bounds=[])
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
    params = {"q": "filler", "limit": 20}
    resp = await client.get(f"/v1/endpoints/{endpoint}/events", params=params, headers=account.headers)
    assert len(resp.json()["events"]) == 20  # a common term fills the page from the walk alone
    deadline = time.monotonic() + 15  # the statistics of other sessions arrive within about a second
    while (scans := await _index_scans(conn, index)) < before + 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert scans >= before + 5, (before, scans)


async def test_a_database_made_before_0036_gets_the_index_and_keeps_its_answers(empty_database, monkeypatch) -> None:
    """An existing data directory upgraded: its finished days had no `q` index (no pg_trgm) or a pg_trgm one;
    0036 adds the function, `q` answers at once (reading the day), and the same once the sweep built the index."""
    shipped = available()
    monkeypatch.setattr("control.db.migrate.available", lambda: [m for m in shipped if m[0] < "0036"])
    assert "0036_search_grams" not in await migrate(empty_database)
    conn = await asyncpg.connect(empty_database)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    try:
        yday = datetime.now(UTC).replace(hour=3, minute=0, second=0, microsecond=0) - timedelta(days=1)
        await partitions.ensure_ahead(conn, days_back=1, days_ahead=1)
        old = Ev("ep_upgraded", received_at=yday, body=b'{"customer": "cus_Upgraded"}')
        await store(conn, None, None, [old, Ev("ep_upgraded", received_at=yday, body=b"{}")])
        filters = event_filters(q="CUS_UPGRADED")

        monkeypatch.setattr("control.db.migrate.available", lambda: shipped)
        assert await migrate(empty_database) == [m[0] for m in shipped if m[0] >= "0036"]  # 0036 and what came after
        unindexed = [r["id"] for r in await db_events.page(conn, "ep_upgraded", filters, limit=20)]
        assert f"events_{yday:%Y%m%d}" in await partitions.index_finished_days(conn)
        indexed = [r["id"] for r in await db_events.page(conn, "ep_upgraded", filters, limit=20)]
        assert unindexed == indexed == [old.id]
    finally:
        await conn.close()
