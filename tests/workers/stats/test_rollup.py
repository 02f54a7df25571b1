"""The ten-minute counters (migration 0037, ADR 0031): each is the exact sum of its minutes, the hour the exact
sum of its ten minutes, a window starting at any minute of an hour counts exactly the events and attempts from
that minute on, across the minute/ten-minute/hour boundaries, and the migration's sums of rows counted before
it give the same stats as counting with the ten-minute rows from the start."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from control.db import histogram
from control.db import stats as db_stats
from control.db.connection import Connection
from control.db.context import Context
from control.db.flush import store_batch
from control.db.migrate import available
from control.records.storable import event_row
from tests.destination import add_destination, add_endpoint
from tests.workers.stats.support import record_at

_KEY = "endpoint_id, start, provider, event_type, failure, slot"
_DELIVERY_KEY = "endpoint_id, start, destination_id, slot"
_ORIGIN = "'2000-01-01 00:00:00+00'::timestamptz"
_SUMS = f"attempts, succeeded, {', '.join(db_stats.LATENCY_COLUMNS)}"


def _base() -> datetime:
    """An hour three hours back: inside the 24 hours the sweep keeps, with nothing of the test's after it."""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)


def _events(base: datetime) -> list[tuple[datetime, str, str, str | None]]:
    """(received at, provider, event type, failure): every minute of the hour at its first and last second, more
    on some minutes, and some in the next hour."""
    found = []
    for m in range(60):
        found.append((base + timedelta(minutes=m), "payments", "invoice.paid", None))
        found.append((base + timedelta(minutes=m, seconds=59), "commerce", f"orders/{m % 3}", None))
        if m % 7 == 0:
            found.append((base + timedelta(minutes=m, seconds=30), "payments", "invoice.paid", "signature_mismatch"))
    found += [(base + timedelta(hours=1, minutes=m), "identity", "user.created", None) for m in (0, 9, 10, 59)]
    return found


def _attempts(endpoint_id: str, destinations: list[str], base: datetime) -> list[tuple[str, str, datetime, bool, int]]:
    return [
        (endpoint_id, destinations[m % 2], base + timedelta(minutes=m, seconds=s), m % 4 != 0, (m * 37 + s) % 2000)
        for m in range(70)
        for s in (0, 59)
    ]


async def _count(conn: Connection) -> tuple[str, list[str], datetime]:
    base = _base()
    endpoint_id = await add_endpoint(conn)
    destinations = [await add_destination(conn, endpoint_id, f"http://127.0.0.1:9/{i}") for i in range(2)]
    rows = [
        event_row(
            record_at(
                endpoint_id,
                at,
                provider,
                event_type,
                signature_valid=failure is None,
                signature_failure_reason=failure,
            )
        )
        for at, provider, event_type, failure in _events(base)
    ]
    async with conn.transaction():
        await store_batch(conn, rows)
        await db_stats.count_deliveries(conn, _attempts(endpoint_id, destinations, base))
    return endpoint_id, destinations, base


async def _read(conn: Connection, endpoint_id: str, base: datetime) -> list[tuple[object, ...]]:
    """What the stats read for a window starting at each minute of the hour: every group of the event counts
    and every destination's (and the overall) attempts and histogram."""
    answers = []
    for m in range(60):
        window = db_stats.Window(since=base + timedelta(minutes=m), until=base + timedelta(hours=2, minutes=5))
        events = [tuple(r.values()) for r in await db_stats.event_counts(conn, endpoint_id, window)]
        overall, by_destination = await db_stats.delivery_counts(conn, endpoint_id, window)
        deliveries = [overall, *sorted(by_destination.values(), key=lambda c: c.destination_id or "")]
        answers.append((m, sorted(events, key=repr), deliveries))
    return answers


async def test_a_ten_minute_row_is_the_sum_of_its_minutes_and_an_hour_of_its_ten_minutes(ctx: Context) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id, _, _ = await _count(conn)
        for finer, coarser, width in ((1, 10, "10 minutes"), (10, 60, "1 hour")):
            for table, key, sums in (("stats_events", _KEY, "count"), ("stats_deliveries", _DELIVERY_KEY, _SUMS)):
                stored = await conn.fetch(f"SELECT {key}, {sums} FROM {table} WHERE span = {coarser} ORDER BY {key}")
                summed = await conn.fetch(
                    f"""SELECT {key.replace("start", f"date_bin('{width}', start, {_ORIGIN}) AS start")},
                               {", ".join(f"sum({c})::bigint" for c in sums.split(", "))}
                          FROM {table} WHERE span = {finer}
                         GROUP BY {", ".join(str(i + 1) for i in range(key.count(",") + 1))} ORDER BY {key}"""
                )
                assert [tuple(r) for r in stored] == [tuple(r) for r in summed] != [], (table, finer, coarser)
        spans = await conn.fetch(
            "SELECT DISTINCT span FROM stats_events WHERE endpoint_id = $1 ORDER BY 1", endpoint_id
        )
    assert [r["span"] for r in spans] == [1, 10, 60]


async def test_a_window_starting_at_any_minute_counts_exactly_from_it(ctx: Context) -> None:
    """Minute rows before the first whole ten minutes, ten-minute rows to the hour, hours after: each count of
    each window is the events and attempts received from its first minute on, those at its first second and
    at the last second of the minute before included and left out."""
    async with ctx.pool.acquire() as conn:
        endpoint_id, destinations, base = await _count(conn)
        answers = await _read(conn, endpoint_id, base)
    events, attempts = _events(base), _attempts(endpoint_id, destinations, base)
    for m, event_groups, delivery_groups in answers:
        since = base + timedelta(minutes=m)
        counted = [e for e in events if e[0] >= since]
        by_hour = Counter(at.replace(minute=0, second=0) for at, *_ in counted)
        per_hour = {r[1]: r[5] for r in event_groups if r[0] == db_stats.EVENTS_BY_HOUR}
        keys = {(r[2], r[3], r[4]): r[5] for r in event_groups if r[0] == db_stats.EVENTS_BY_KEY}
        assert per_hour == dict(by_hour), m
        assert keys == dict(Counter((provider, event_type, failure) for _, provider, event_type, failure in counted)), m
        tried = [a for a in attempts if a[2] >= since]
        expected = [
            db_stats.DeliveryCounts(
                destination_id=destination_id,
                attempts=len(mine := [a for a in tried if destination_id in (None, a[1])]),
                succeeded=sum(1 for a in mine if a[3]),
                latency=histogram.histogram([a[4] for a in mine]),
            )
            for destination_id in (None, *sorted(destinations))
        ]
        assert delivery_groups == expected, m


async def test_the_migration_sums_rows_counted_before_it_into_the_same_stats(ctx: Context) -> None:
    """Counters written without ten-minute rows (as before migration 0037) and summed by it read the same in
    every window, row for row, as counters written with them."""
    (sql,) = [text for version, text in available() if version == "0037_stats_ten_minutes"]
    async with ctx.pool.acquire() as conn:
        endpoint_id, _, base = await _count(conn)
        before = await _read(conn, endpoint_id, base)
        rows = await conn.fetch(f"SELECT {_KEY}, count FROM stats_events WHERE span = 10 ORDER BY 1, 2, 3, 4, 5, 6")
        async with conn.transaction():
            await conn.execute("DELETE FROM stats_events WHERE span = 10")
            await conn.execute("DELETE FROM stats_deliveries WHERE span = 10")
            assert await _read(conn, endpoint_id, base) != before  # the ten-minute rows are what the window reads
            await conn.execute(sql)
        after = await _read(conn, endpoint_id, base)
        again = await conn.fetch(f"SELECT {_KEY}, count FROM stats_events WHERE span = 10 ORDER BY 1, 2, 3, 4, 5, 6")
    assert after == before
    assert again == rows
