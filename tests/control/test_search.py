"""`q` over every kind of partition: finished days (full trigram index or none yet), the day being written
(its prefix index and the tail past it), label values, wildcard characters, late events, and events moved
by the flush and searched at once. The trigram index needs no extension (ADR 0057), so it exists on every
server the tests may use, the embedded one without pg_trgm included."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest

from control.db import events as db_events
from control.db import partitions
from control.db.context import Context
from control.routing.route import Router
from control.service.events.read import event_filters
from control.workers.flush import Flush
from shared.wire import IngestRecord, encode_records
from tests.conftest import ingest_record
from tests.events_support import Ev, grams_of, store
from tests.helpers import assert_error, create_endpoint


async def _pages(client, account, endpoint_id, **params) -> list[str]:
    """Every match, newest first, one event per page (so every page crosses the arms' keyset)."""
    seen, cursor = [], None
    while True:
        query = {"limit": 1, **params} | ({"cursor": cursor} if cursor else {})
        resp = await client.get(f"/v1/endpoints/{endpoint_id}/events", params=query, headers=account.headers)
        assert resp.status_code == 200, resp.text
        seen += [e["id"] for e in resp.json()["events"]]
        cursor = resp.json()["next_cursor"]
        if cursor is None:
            return seen


def _newest_first(events: list[Ev]) -> list[str]:
    return [e.id for e in sorted(events, key=lambda e: (e.received_at, e.id), reverse=True)]


async def test_q_is_the_same_over_full_prefix_tail_and_unindexed_days(client, account, conn) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    other = (await create_endpoint(client, account.headers))["id"]
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    day3, yday = today - timedelta(days=3), today - timedelta(days=1)
    await partitions.ensure_ahead(conn, days_back=3, days_ahead=1)
    y_bound, t_bound = yday + timedelta(hours=12), today + timedelta(seconds=10)
    # one slot per arm: unindexed day, yesterday's prefix and tail, today's prefix and tail
    slots = [day3 + timedelta(hours=1), yday + timedelta(hours=1), yday + timedelta(hours=13)]
    slots += [today + timedelta(seconds=5), today + timedelta(seconds=20)]
    body, label, near = [], [], []
    for i, at in enumerate(slots):
        body.append(
            Ev(endpoint, received_at=at, body=f'{{"n": "Needle {i}", "p": "50%", "k": "a_b", "d": "C:\\\\x"}}'.encode())
        )
        label.append(
            Ev(endpoint, received_at=at, body=b"{}", labels=[{"key": "plan", "value": f"Gold-{i}", "color": "#aabbcc"}])
        )
        near.append(Ev(endpoint, received_at=at, body=b"needlE 50 pct aXb C:x"))
    foreign = Ev(other, received_at=slots[-1], body=b"needle gold-4")
    await store(conn, None, None, [*body, *label, *near, foreign])

    for start in (yday, today):  # another endpoint's events, so the planner's choice below is the real one
        await conn.execute(_FILLER, other, start)
    await conn.execute("ANALYZE events")
    made = [await partitions.index_today(conn, upto=y_bound), await partitions.index_today(conn, upto=t_bound)]
    assert await partitions.index_today(conn, upto=t_bound) is None  # one reaching as far exists
    assert made == [f"events_{yday:%Y%m%d}_keys_to_120000", f"events_{today:%Y%m%d}_keys_to_000010"]
    days = [day3 + timedelta(days=n) for n in range(11)]  # every partition's start too (the migration's 7 ahead)
    assert await db_events.search_bounds(conn) == sorted([*days, y_bound, t_bound])
    # stored after the index, inside its range: a partial index is maintained for such rows
    late = Ev(endpoint, received_at=today + timedelta(seconds=1), body=b"late needle")
    await store(conn, None, None, [late])

    async def answers() -> None:
        everything = _newest_first([*body, *near, late])
        assert await _pages(client, account, endpoint, q="NEEDLE") == everything
        assert await _pages(client, account, endpoint, q="needle 3") == [body[3].id]
        assert await _pages(client, account, endpoint, q="50%") == _newest_first(body)
        assert await _pages(client, account, endpoint, q="a_b") == _newest_first(body)
        assert await _pages(client, account, endpoint, q="c:\\\\x") == _newest_first(
            body
        )  # the body's JSON text holds C:\\x
        assert await _pages(client, account, endpoint, q="\\") == _newest_first(body)
        assert await _pages(client, account, endpoint, q="%") == _newest_first(body)
        assert await _pages(client, account, endpoint, q="gold-") == _newest_first(label)
        assert await _pages(client, account, endpoint, q="GOLD-4") == [label[4].id]
        assert await _pages(client, account, endpoint, q="no such text") == []
        since = {"since": f"{today:%Y-%m-%d}"}
        assert await _pages(client, account, endpoint, q="needle", **since) == _newest_first(
            [*body[3:], *near[3:], late]
        )
        until = {"until": f"{yday:%Y-%m-%d}"}
        assert await _pages(client, account, endpoint, q="gold", **until) == _newest_first(label[:3])
        window = {
            "since": (yday + timedelta(hours=11)).isoformat(),
            "until": (today + timedelta(seconds=7)).isoformat(),
        }
        assert await _pages(client, account, endpoint, q="needle", **window) == _newest_first(
            [body[2], near[2], body[3], near[3], late]
        )

    await answers()
    # the arms' literal bounds let the planner prove each prefix index's predicate
    # (with enough rows in each prefix, stored before it, that a selective term is worth the index)
    plans = []
    async with conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        for arm in reversed(db_events._arms([y_bound, t_bound], event_filters())):  # oldest first
            keys = grams_of(endpoint, "needle")
            sql = f"EXPLAIN SELECT e.id FROM events e WHERE e.search_text LIKE '%needle%' AND {keys}{arm}"
            plans.append("\n".join(r[0] for r in await conn.fetch(sql)))
    assert f"events_{yday:%Y%m%d}_keys_to_120000" in plans[0], plans[0]
    assert f"events_{today:%Y%m%d}_keys_to_000010" in plans[1]

    # the day's full index supersedes its prefix; the answers do not change
    finished = await partitions.index_finished_days(conn)
    assert {f"events_{yday:%Y%m%d}", f"events_{day3:%Y%m%d}"} <= set(finished)
    assert await db_events.search_bounds(conn) == sorted([*days, t_bound])
    left = await conn.fetchval("SELECT count(*) FROM pg_class WHERE relname LIKE $1", f"events_{yday:%Y%m%d}_keys_to_%")
    assert left == 0
    await answers()


_FILLER = """
INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8, search_text)
SELECT 'evt_filler' || $2::timestamptz::date || g, $1, $2::timestamptz + (g % 9) * interval '1 second', 'POST',
       '{}'::jsonb, '', true, 'filler ' || md5(g::text) FROM generate_series(1, 4000) g
"""


def _record(endpoint_id: str, body: object, at_us: int) -> IngestRecord:
    """An ingest record of ``body`` as JSON, received at ``at_us`` (the day partition it lands in)."""
    return ingest_record(endpoint_id, json.dumps(body).encode(), at_us=at_us)


async def test_flushed_events_are_found_at_once_around_todays_prefix(client, account, ctx: Context, conn) -> None:
    """Read-your-writes: an event the flush has stored is found by `q` at once, whether it lies past
    today's prefix index (scanned) or inside it (a late event, indexed by its insert); label values too."""
    endpoint = (await create_endpoint(client, account.headers))["id"]
    rule = await client.post(
        f"/v1/endpoints/{endpoint}/labels", json={"path": "customer", "output_key": "customer"}, headers=account.headers
    )
    assert rule.status_code == 201, rule.text
    now_us = int(time.time() * 1_000_000)
    bound = datetime.fromtimestamp(now_us // 1_000_000 - 1, UTC)  # whole seconds, just before now
    await partitions.index_today(conn, upto=bound)
    fresh = _record(endpoint, {"customer": "Cus_Fresh", "note": "x"}, now_us)
    late = _record(endpoint, {"customer": "cus_late", "note": "y"}, int(bound.timestamp() * 1_000_000) - 5_000_000)
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records([fresh, late])})
    flush = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0, router=Router(ctx))
    await flush.ensure_groups()
    while await flush.step():
        pass
    assert await _pages(client, account, endpoint, q="cus_fresh") == [fresh.id]
    assert await _pages(client, account, endpoint, q="CUS_LATE") == [late.id]
    assert await _pages(client, account, endpoint, q="cus_") == [fresh.id, late.id]
    assert await _pages(client, account, endpoint, q='"note"') == [fresh.id, late.id]


async def test_q_finds_the_path_the_query_and_header_values(client, account, ctx: Context) -> None:
    """Issue 45: `q=shop` found nothing for `/orders?source=shop`. What a person remembers of a request besides
    its body is searched too: the path and query as sent (and the query decoded), and every header value that is
    text; a header value that is not (kept as base64) is not, and neither are header names."""
    endpoint = (await create_endpoint(client, account.headers))["id"]
    headers = [
        (b"content-type", b"application/json"),
        (b"x-shop-domain", b"Acme-Store.example"),
        (b"x-binary", b"\xff\xfebinary-ish"),
    ]
    orders = ingest_record(
        endpoint, b'{"n": 1}', headers=headers, path="orders/new", query="source=shop&who=J%C3%BCrgen"
    )
    other = ingest_record(endpoint, b'{"n": 2}', path="refunds", query="")
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records([orders, other])})
    flush = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0, router=Router(ctx))
    await flush.ensure_groups()
    while await flush.step():
        pass
    for q in ("shop", "source=shop", "/orders/new", "ORDERS", "jürgen", "acme-store.example"):
        assert await _pages(client, account, endpoint, q=q) == [orders.id], q
    assert await _pages(client, account, endpoint, q="refunds") == [other.id]
    for q in ("binary-ish", "x-shop-domain"):
        assert await _pages(client, account, endpoint, q=q) == [], q


async def test_the_sweeps_default_boundary_is_the_last_whole_hour(conn) -> None:
    def expected() -> str | None:
        bound = (datetime.now(UTC) - timedelta(minutes=2)).replace(minute=0, second=0, microsecond=0)
        return None if bound.hour == 0 else f"events_{bound:%Y%m%d}_keys_to_{bound:%H}0000"

    await partitions.ensure_ahead(conn, days_back=1, days_ahead=1)
    before = expected()
    made = await partitions.index_today(conn)
    assert made in {before, expected()}  # either side of an hour turning meanwhile
    assert await partitions.index_today(conn) is None or made != expected()  # idempotent within the hour


@pytest.mark.parametrize(
    ("q", "field"),
    [("a\x00b", "q"), ("x" * 201, "q")],
)
async def test_bad_q_is_400_naming_it(client, account, q, field) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.get(f"/v1/endpoints/{endpoint}/events", params={"q": q}, headers=account.headers)
    assert_error(resp, 400, "validation_error", field=field)


async def test_a_q_that_is_not_utf8_is_read_as_replacement_characters(client, account, conn) -> None:
    """The query string's rule (not ``q``'s): a percent-escape that is not UTF-8 reads as U+FFFD, valid text;
    it finds only what holds that character, and is never a 500."""
    endpoint = (await create_endpoint(client, account.headers))["id"]
    marked = Ev(endpoint, body="broken \ufffd byte".encode())
    await store(conn, None, None, [marked, Ev(endpoint, body=b"plain")])
    resp = await client.get(f"/v1/endpoints/{endpoint}/events?q=%ff", headers=account.headers)
    assert resp.status_code == 200, resp.text
    assert [e["id"] for e in resp.json()["events"]] == [marked.id]


def _ranges(arms: list[str]) -> list[tuple[datetime | None, datetime | None]]:
    """Each arm's (low, high) from its literal bounds."""
    found = []
    for arm in arms:
        low = re.search(r"received_at >= '([^']+)'", arm)
        high = re.search(r"received_at < '([^']+)'", arm)
        found.append(tuple(datetime.fromisoformat(m.group(1)) if m else None for m in (low, high)))
    return found


def test_the_arms_cover_all_time_newest_first_and_grow_only_across_days() -> None:
    """The read past the walk is a statement an arm: the newest two ranges alone (a page filling there plans no
    other day), then arms twice as long each time (a term in no row runs log2(days) statements, not one a day),
    never across a prefix boundary (its partial index is used only where an arm's literal bound implies it)."""
    today = datetime(2026, 12, 4, tzinfo=UTC)
    days = [today - timedelta(days=n) for n in range(30, -2, -1)]  # 30 days back to tomorrow
    prefixes = [today - timedelta(hours=11), today + timedelta(hours=8)]  # yesterday's (no full index yet), today's
    arms = _ranges(db_events._arms(sorted([*days, *prefixes]), event_filters(), upto=today + timedelta(hours=9)))
    assert arms[:2] == [(prefixes[1], today + timedelta(days=1)), (today, prefixes[1])]
    assert [high for _, high in arms[1:]] == [low for low, _ in arms[:-1]]  # contiguous, disjoint, newest first
    assert arms[-1][0] is None  # down to the oldest event
    assert all(not (low is not None and low < p < high) for low, high in arms if high for p in prefixes)
    spans = [(high - low).days for low, high in arms[2:-1]]
    assert spans == sorted(spans), arms
    assert len(arms) <= 8, arms  # 32 days: 7 arms, not 34
