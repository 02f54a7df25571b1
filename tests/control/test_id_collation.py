"""Ids and keys compare as bytes (migration 0040, ADR 0072): every id column and what it is joined with has
the "C" collation, so a join's comparison and the indexes on both sides agree; ids sort as they did; a database
made before 0040 keeps its rows, its pages in the same order, and its indexes used."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from control.db import events as db_events
from control.db import partitions
from control.db.migrate import available, migrate
from control.service.events.read import event_filters
from shared import ids
from tests.events_support import Ev, store

_NOT_OURS = {("deliveries", "trace_id"), ("deliveries", "span_id")}
"""Named like ids, but W3C trace context (hex), compared with nothing of ours."""

_ID_COLUMNS = """
SELECT c.relname, a.attname, coalesce(co.collname, '') AS coll
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_collation co ON co.oid = a.attcollation
 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
   AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid = 'text'::regtype
   AND (a.attname = 'id' OR a.attname LIKE '%\\_id')
"""


async def test_every_id_column_compares_as_bytes(conn: asyncpg.Connection) -> None:
    """A column named id or ``*_id`` that stayed in the database's collation would meet a "C" one in a join:
    the comparison takes "C", and the other side's index, built in the default collation, could not serve it."""
    rows = await conn.fetch(_ID_COLUMNS)
    assert len(rows) > 60
    wrong = [(r["relname"], r["attname"], r["coll"]) for r in rows if (r["relname"], r["attname"]) not in _NOT_OURS]
    assert [w for w in wrong if w[2] != "C"] == []


async def test_both_sides_of_every_foreign_key_have_one_collation(conn: asyncpg.Connection) -> None:
    pairs = await conn.fetch(
        """SELECT con.conname, a.attcollation AS here, f.attcollation AS there
             FROM pg_constraint con
             JOIN LATERAL unnest(con.conkey, con.confkey) AS k(mine, theirs) ON true
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.mine
             JOIN pg_attribute f ON f.attrelid = con.confrelid AND f.attnum = k.theirs
            WHERE con.contype = 'f' AND con.connamespace = 'public'::regnamespace"""
    )
    assert len(pairs) > 20
    assert [p["conname"] for p in pairs if p["here"] != p["there"]] == []


async def test_ids_sort_as_bytes_as_they_do_in_python_and_in_a_linguistic_collation(
    conn: asyncpg.Connection,
) -> None:
    """Ids are ASCII (a lowercase prefix, ``_``, 26 Crockford characters): their byte order is their time
    order, the order Python gives them, and the order of the default collation and of ICU's en-US."""
    start = 1_700_000_000_000
    made = [ids.new_id(p, start + n * 37_911) for n in range(300) for p in ("evt", "ep", "al", "alert", "task")]
    made += [ids.new_id("evt", start) for _ in range(50)]  # one millisecond: the random part decides
    collations = ['"C"', '"default"']
    if await conn.fetchval("SELECT count(*) FROM pg_collation WHERE collname = 'en-US-x-icu'"):
        collations.append('"en-US-x-icu"')
    for collation in collations:
        got = await conn.fetchval(
            f"SELECT array_agg(i ORDER BY i COLLATE {collation}) FROM unnest($1::text[]) AS u(i)", made
        )
        assert got == sorted(made), collation


_FIRST_0040 = "0040"


async def test_a_database_made_before_0040_keeps_its_pages_and_uses_its_indexes(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing data directory upgraded past 0040: yesterday's and today's partitions keep their rows; the
    newest-first pages (keyset on received_at, id: ties broken by id) are the same rows in the same order;
    rows stored after are paged with them; the page's statement still reads the endpoint's index."""
    shipped = available()
    monkeypatch.setattr("control.db.migrate.available", lambda: [m for m in shipped if m[0] < _FIRST_0040])
    await migrate(empty_database)
    conn = await asyncpg.connect(empty_database)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    try:
        await partitions.ensure_ahead(conn, days_back=1, days_ahead=1)
        now = datetime.now(UTC).replace(microsecond=0)
        times = [now - timedelta(days=1), now - timedelta(hours=1), now]
        await store(conn, None, None, [Ev("ep_upgraded", received_at=t) for t in times for _ in range(40)])
        needle = Ev("ep_upgraded", received_at=times[0], body=b'{"customer": "cus_Upgraded"}')
        await store(conn, None, None, [needle])
        assert f"events_{times[0]:%Y%m%d}" in await partitions.index_finished_days(conn)  # q's index, by endpoint

        async def pages() -> list[str]:
            seen, after = [], None
            while True:
                rows = await db_events.page(conn, "ep_upgraded", event_filters(), limit=7, after=after)
                if not rows:
                    return seen
                seen += [r["id"] for r in rows]
                after = (rows[-1]["received_at"], rows[-1]["id"])

        before = await pages()
        assert len(before) == 121 == len(set(before))
        found = [r["id"] for r in await db_events.page(conn, "ep_upgraded", event_filters(q="CUS_UPGRADED"), limit=5)]
        assert found == [needle.id]
        monkeypatch.setattr("control.db.migrate.available", lambda: shipped)
        assert [v for v in await migrate(empty_database) if v.startswith(_FIRST_0040)] == ["0040_id_collation"]
        assert await pages() == before
        again = [r["id"] for r in await db_events.page(conn, "ep_upgraded", event_filters(q="CUS_UPGRADED"), limit=5)]
        assert again == found  # yesterday's q index was rebuilt with endpoint_id's new collation, and answers
        indexes = await conn.fetchval(
            "SELECT count(*) FROM pg_index WHERE indrelid = $1::regclass AND indisvalid", f"events_{times[0]:%Y%m%d}"
        )
        assert indexes == 6  # the five btrees and q's

        later = [Ev("ep_upgraded", received_at=now) for _ in range(5)]
        await store(conn, None, None, later)
        after_upgrade = await pages()
        assert sorted(after_upgrade[:45]) == sorted([e.id for e in later] + before[:40])
        assert after_upgrade[45:] == before[40:]

        await conn.execute("ANALYZE events")
        plan = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) SELECT id FROM events e WHERE e.endpoint_id = $1 "
            "AND (e.received_at, e.id) < ($2, $3) ORDER BY e.received_at DESC, e.id DESC LIMIT 7",
            "ep_upgraded",
            now,
            before[10],
        )
        assert "events_endpoint_received" in plan or "endpoint_id_received_at_id_idx" in plan
    finally:
        await conn.close()
