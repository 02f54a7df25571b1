"""Reads of captured events: filtered keyset pages, the latest match, the first match of a wait, by id.

Every list query is ``endpoint_id = $1`` plus filters, ordered by ``(received_at, id)``, so it walks the
``events_endpoint_received`` index (partition by partition, merged) and stops after ``limit`` rows.
``q`` uses the trigram indexes of ``control.db.partitions`` (``hy_search_keys``, on every server: ADR 0057): a
finished day's full index, and the day being written's prefix index (``received_at < B``). Their elements are the
trigrams prefixed by the endpoint's tag (``endpoint_tag``), so a page reads its own endpoint's posting lists only:
the index read grows with the endpoint's matches, not the whole table's. A ``q`` page is
read in two steps. First the endpoint's newest ``_WALK`` rows that match the other filters are read in order
and tested with LIKE: a common term fills the page there (the planner cannot tell a common term from a rare
one: it multiplies the trigrams' frequencies as if they were independent, and would read every match through
the index). Only a page left short goes to the index, where the term's trigrams (``query_grams``), tagged,
must all be in the row's keys. The planner can use a partial index only where the query's own conditions imply its
predicate, so that query is split at each prefix boundary into arms with literal time bounds: before B the
prefix index, from B on (at most about an hour of events) the endpoint's rows are read. The arms are also split at
days, a statement each, run newest first until the page is full (``IndexedRead``, ADR 0074). The arms cover all
time, and LIKE decides every match, so the steps and the split are only about speed, never about which events
match.

A ``q`` query is always planned for its own pattern (``plan_cache_mode = force_custom_plan`` for that one
statement): asyncpg prepares statements, and after five runs on a connection Postgres may switch to a generic
plan, which cannot judge a LIKE parameter's selectivity. Measured with ``bench list``: a rare term's page went
from about 20 ms to about 240 ms for every request once each pooled connection had run the query five times.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from control.db.connection import Connection, returned
from control.db.follow_horizon import SNAPSHOT, horizon
from control.db.partitions import KEYS

__all__ = (
    "EventFilters",
    "IndexedRead",
    "endpoint_tag",
    "first_match",
    "first_stored_after",
    "frequent_grams",
    "get_for_account",
    "now_position",
    "page",
    "query_grams",
    "search_bounds",
    "search_statements",
)

_COLUMNS = """e.id, e.endpoint_id, e.received_at, e.method, e.path, e.query, e.headers, e.headers_base64, e.body,
    e.body_is_utf8, e.content_type, host(e.source_ip) AS source_ip, e.provider, e.event_type, e.idempotency_key,
    e.signature_valid, e.signature_failure_reason, e.ip_allowed, e.labels, e.body_expired_at,
    coalesce(e.body_size, octet_length(e.body)) AS body_size, e.traceparent, e.handshake"""
_CUSTOM_PLAN = "SET LOCAL plan_cache_mode = force_custom_plan"
"""For the rest of the caller's (or the statement's own) transaction: see the module's docstring."""
_WALK = 2000
"""Rows a ``q`` page reads in order before it asks the index: a term in more than one row of about a hundred
fills a page of 20 there; past it, the index reads at most about a hundredth of the endpoint's rows."""


@dataclass(frozen=True, slots=True)
class EventFilters:
    """The shared event filters, already validated and normalised by the service layer."""

    since: datetime | None = None
    """Inclusive lower bound on received_at."""
    before: datetime | None = None
    """Exclusive upper bound on received_at (an inclusive ``until`` plus one microsecond, or the next day)."""
    provider: str | None = None
    event_type: str | None = None
    method: str | None = None
    signature_valid: bool | None = None
    search: str | None = None
    """A LIKE pattern over search_text, lowercased as search_text is (so LIKE is ILIKE without lowering
    every row's text, half the cost of a scan), wildcards of the caller's text already escaped."""
    q: str | None = None
    """The caller's ``q`` that ``search`` was made from, to show back (a bulk retry's filters)."""


class _Where:
    """Collects ``AND`` conditions with their positional parameters."""

    def __init__(self, endpoint_id: str, args: list[object] | None = None) -> None:
        self.args: list[object] = [] if args is None else args  # shared: several WHEREs in one statement
        self.parts: list[str] = []
        self.add("e.endpoint_id = {}", endpoint_id)

    def arg(self, value: object) -> str:
        self.args.append(value)
        return f"${len(self.args)}"

    def add(self, template: str, *values: object) -> None:
        self.parts.append(template.format(*(self.arg(v) for v in values)))

    def filters(self, f: EventFilters) -> _Where:
        if f.since is not None:
            self.add("e.received_at >= {}", f.since)
        if f.before is not None:
            self.add("e.received_at < {}", f.before)
        if f.provider is not None:
            self.add("e.provider = {}", f.provider)
        if f.event_type is not None:
            self.add("e.event_type = {}", f.event_type)
        if f.method is not None:
            self.add("e.method = {}", f.method)
        if f.signature_valid is not None:
            self.add("e.signature_valid = {}", f.signature_valid)
        if f.search is not None:
            self.add("e.search_text LIKE {}", f.search)
        return self

    @property
    def sql(self) -> str:
        return " AND ".join(self.parts)


async def page(
    conn: Connection,
    endpoint_id: str,
    filters: EventFilters,
    *,
    limit: int,
    after: tuple[datetime, str] | None = None,
) -> list[asyncpg.Record]:
    """Up to ``limit`` matches, newest first, strictly older than the ``after`` (received_at, id) key."""
    if filters.search is None:
        where = _Where(endpoint_id).filters(filters)
        if after is not None:
            where.add("(e.received_at, e.id) < ({}, {})", *after)
        order = f"ORDER BY e.received_at DESC, e.id DESC LIMIT {where.arg(limit)}"
        return await conn.fetch(f"SELECT {_COLUMNS} FROM events e WHERE {where.sql} {order}", *where.args)
    async with conn.transaction():
        await conn.execute(_CUSTOM_PLAN)
        utf8 = conn.get_settings().server_encoding == "UTF8"
        (walk, walk_args), _ = search_statements(endpoint_id, filters, limit=limit, after=after, bounds=[], utf8=utf8)
        found = await conn.fetch(walk, *walk_args)
        if len(found) == limit:
            return found
        reach_sql, reach_args = _walk_reach(endpoint_id, filters, after)
        reach = await conn.fetchrow(reach_sql, *reach_args)
        if reach is None or reach["walked"] < _WALK:
            return found  # the walk read every row the filters allow
        # every match at or after the walk's oldest row is in ``found``: the index is asked for older ones only
        older = (reach["received_at"], reach["id"])
        bounds = await search_bounds(conn)
        grams = query_grams(filters.q.lower()) if filters.q is not None else []
        frequent = await frequent_grams(conn, endpoint_id, grams)
        _, indexed = search_statements(
            endpoint_id, filters, limit=limit, after=older, bounds=bounds, utf8=utf8, frequent=frequent
        )
        for arm in range(len(indexed.arms)):  # newest first, until the page is full
            sql, args = indexed.statement(arm, limit - len(found))
            found += await conn.fetch(sql, *args)
            if len(found) == limit:
                break
        return found


def _walk_reach(
    endpoint_id: str, filters: EventFilters, after: tuple[datetime, str] | None
) -> tuple[str, list[object]]:
    """The statement reading how far a short page's walk went: the key of the oldest row it read and how many
    it read (none when nothing matches the filters). Those rows were just read, so their pages are cached."""
    where = _Where(endpoint_id).filters(dataclasses.replace(filters, search=None))
    if after is not None:
        where.add("(e.received_at, e.id) < ({}, {})", *after)
    sql = f"""SELECT w.received_at, w.id, count(*) OVER () AS walked
                FROM (SELECT e.received_at, e.id FROM events e WHERE {where.sql}
                       ORDER BY e.received_at DESC, e.id DESC LIMIT {_WALK}) w
               ORDER BY w.received_at, w.id LIMIT 1"""
    return sql, where.args


def search_statements(
    endpoint_id: str,
    filters: EventFilters,
    *,
    limit: int,
    after: tuple[datetime, str] | None,
    bounds: list[datetime],
    utf8: bool = True,
    frequent: Collection[str] = (),
) -> tuple[tuple[str, list[object]], IndexedRead]:
    """A ``q`` page's walk (with its parameters, ``limit`` its page) and its indexed read split at ``bounds``
    (each arm's limit given as it runs). ``utf8``: the database's encoding is UTF-8, where ``substr`` counts
    characters as Python does; elsewhere it counts bytes, and only ASCII trigrams are asked for. ``frequent``
    trigrams are left out of the index condition unless all are (``frequent_grams``)."""
    assert filters.search is not None, "only a q page has them"
    where = _Where(endpoint_id).filters(dataclasses.replace(filters, search=None))
    if after is not None:  # the plain bound too, so the planner prunes the days past it
        where.add("(e.received_at, e.id) < ({}, {}) AND e.received_at <= {}", *after, after[0])
    conditions, search = where.sql, where.arg(filters.search)
    walk = f"""SELECT {_COLUMNS} FROM (SELECT e.* FROM events e WHERE {conditions}
                                       ORDER BY e.received_at DESC, e.id DESC LIMIT {_WALK}) e
                WHERE e.search_text LIKE {search} ORDER BY e.received_at DESC, e.id DESC LIMIT ${len(where.args) + 1}"""
    walk_args = [*where.args, limit]
    conditions += f" AND e.search_text LIKE {search}"
    grams = query_grams(filters.q.lower()) if filters.q is not None else []
    if not utf8:
        grams = [g for g in grams if g.isascii()]
    grams = [g for g in grams if g not in frequent] or grams
    if grams:  # the columns unqualified, as the index spells them
        tag = endpoint_tag(endpoint_id)
        conditions += f" AND {KEYS} @> {where.arg([tag + g for g in grams])}::text[]"
    order = f"ORDER BY e.received_at DESC, e.id DESC LIMIT ${len(where.args) + 1}"
    arms = [
        f"SELECT {_COLUMNS} FROM events e WHERE {conditions}{arm} {order}"
        for arm in _arms(bounds, filters, None if after is None else after[0])
    ]
    return (walk, walk_args), IndexedRead(arms, where.args)


@dataclass(frozen=True, slots=True)
class IndexedRead:
    """A ``q`` page's read past its walk: a statement per arm (``_arms``: a day or a day's part either side of
    its prefix boundary, then runs of older days), newest first, each with its own ``ORDER BY … LIMIT`` and the
    limit as its last parameter. The arms' ranges are disjoint, so their answers in turn are the order; the
    caller runs them one by one and stops at the arm that fills the page. Statements, not ``UNION ALL`` arms
    of one: a page plans only what it reads, and stopping early rests on the caller's loop, not on the
    order in which an Append runs its arms (undocumented). One round trip an arm (about 0.4 ms)."""

    arms: list[str]
    args: list[object]

    def statement(self, arm: int, limit: int) -> tuple[str, list[object]]:
        return self.arms[arm], [*self.args, limit]


def query_grams(text: str) -> list[str]:
    """The trigrams every search text holding ``text`` holds (``hy_search_keys`` less the tag, migration 0039:
    every 3-character substring, characters as Postgres counts them in a UTF-8 database, as Python does), less
    those with U+0001, which the SQL side splits on; none for a text under 3 characters (the index cannot help)."""
    return sorted({g for i in range(len(text) - 2) if "\x01" not in (g := text[i : i + 3])})


def endpoint_tag(endpoint_id: str) -> str:
    """The prefix of the endpoint's index keys: ``left(md5(endpoint_id), 6)`` in ``hy_search_keys``. A tag two
    endpoints share only adds candidates that ``endpoint_id = $1`` and LIKE reject."""
    return hashlib.md5(endpoint_id.encode(), usedforsecurity=False).hexdigest()[:6]


async def frequent_grams(conn: Connection, endpoint_id: str, grams: list[str]) -> set[str]:
    """Those of ``grams`` in more than half the endpoint's rows, by the statistics of the newest finished day's
    index (its keys' ``most_common_elem_freqs``, over the day's rows, against the endpoint's share of the day's
    rows, ``most_common_freqs`` of ``endpoint_id``; none before an ANALYZE, none for an endpoint too small to
    be listed there): asking for them narrows a match little, and GIN reads their posting lists, as long as the
    endpoint's rows of the day, page by page while it intersects them.

    Tuning note: at 1M events (local PG 15, bench list's data, the index of 0036), a rare term's indexed read
    took 16.3 ms p50 with `cus` and `us_` (in every row) asked for and 7.1 ms without; a term in 1 row of 450,
    27.5 → 7.7 ms.
    """
    if not grams:
        return set()
    index = await conn.fetchval(_NEWEST_INDEX)
    if index is None:
        return set()
    tag = endpoint_tag(endpoint_id)
    rows = await conn.fetch(_FREQUENT, [tag + g for g in grams], endpoint_id, index, index[: -len("_keys")])
    return {r["elem"][len(tag) :] for r in rows}


_NEWEST_INDEX = """
SELECT max(relname)::text FROM pg_class
 WHERE relkind = 'i' AND relname ~ '^events_[0-9]{8}_keys$' AND relnamespace = current_schema()::regnamespace
"""

# The names as parameters (constants under the page's custom plan), so pg_stats is read for those two only.
_FREQUENT = """
SELECT f.elem FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS f(elem, freq)
 WHERE s.schemaname = current_schema() AND s.tablename = $3 AND f.elem = any($1::text[])
   AND f.freq > 0.5 * (SELECT v.freq FROM pg_stats p,
                              unnest(p.most_common_vals::text::text[], p.most_common_freqs) AS v(val, freq)
                        WHERE p.schemaname = current_schema() AND p.tablename = $4 AND p.attname = 'endpoint_id'
                          AND v.val = $2)
"""


async def search_bounds(conn: Connection) -> list[datetime]:
    """Where a ``q`` page's indexed read is split into arms, ascending: the start of every day's partition, and
    the boundary of each valid prefix index of a partition without a full one (its latest). Read from the
    catalog per page (well under a millisecond), so a new index is used at once and a dropped one never named.

    Arms of a day (the newest ones; each its partition alone, the others pruned while planning) are what let
    the read stop at the newest day that fills the page: with one arm over all days, every day's matches were
    read and sorted for a page of 20, so the read grew with the table (``bench list``'s middling term: the
    endpoint's matches of the whole week, to keep the newest 20)."""
    rows = await conn.fetch(_BOUNDS)
    return [r["at"] for r in rows]


_BOUNDS = """
SELECT to_date(substr(c.relname, 8, 8), 'YYYYMMDD')::timestamp AT TIME ZONE 'utc' AS at
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_[0-9]{8}$'
UNION
SELECT max((to_date(substr(c.relname, 8, 8), 'YYYYMMDD')::timestamp + right(ic.relname, 6)::time)
           AT TIME ZONE 'utc') AS at
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
  JOIN pg_index x ON x.indrelid = c.oid AND x.indisvalid JOIN pg_class ic ON ic.oid = x.indexrelid
 WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_[0-9]{8}$'
   AND ic.relname ~ ('^' || c.relname || '_keys_to_[0-9]{6}$')
   AND NOT EXISTS (SELECT 1 FROM pg_index f JOIN pg_class fc ON fc.oid = f.indexrelid
                    WHERE f.indrelid = c.oid AND f.indisvalid AND fc.relname = c.relname || '_keys')
 GROUP BY c.relname ORDER BY 1
"""


def _arms(bounds: list[datetime], filters: EventFilters, upto: datetime | None = None) -> list[str]:
    """Conditions splitting time at ``bounds`` (literals, so the planner can prove each prefix index's
    predicate and prunes every partition but the arm's; they come from the catalog, never from a caller), less
    the ranges the filters exclude, and those wholly after ``upto`` (the keyset's bound, inclusive); newest
    first. The newest two ranges are an arm each, then each arm spans twice as many ranges as the one before
    (never across a prefix boundary, which must stay an arm's bound to be proven): a page that fills in the
    newest days runs an arm a day; a term in no row runs about log2(days) arms, not one a day (a statement
    each), and an arm reads at most about as many days as all the newer ones, which left the page short."""
    edges: list[datetime | None] = [None, *bounds, None]
    ranges = []
    for low, high in itertools.pairwise(edges):
        if high is not None and filters.since is not None and filters.since >= high:
            continue
        if low is not None and filters.before is not None and filters.before <= low:
            continue
        if low is not None and upto is not None and upto < low:
            continue
        ranges.append((low, high))
    ranges.reverse()
    arms, size, i = [], 1, 0
    while i < len(ranges):
        high, j = ranges[i][1], i
        while j + 1 < len(ranges) and j + 1 - i < size and _midnight(ranges[j][0]):
            j += 1
        low = ranges[j][0]
        arm = "" if low is None else f" AND e.received_at >= '{low.isoformat()}'"
        arms.append(arm + ("" if high is None else f" AND e.received_at < '{high.isoformat()}'"))
        size, i = (1 if not arms[1:] else size * 2), j + 1
    return arms


def _midnight(at: datetime | None) -> bool:
    """A partition's start, where an arm may go on into the day before (a prefix boundary is never one)."""
    return at is not None and at.time() == datetime.min.time() and at.utcoffset() == timedelta(0)


async def first_match(
    conn: Connection,
    endpoint_id: str,
    filters: EventFilters,
    *,
    received_from: datetime | None,
    ids: list[str] | None,
) -> asyncpg.Record | None:
    """The oldest match that counts for a waiter: received at or after ``received_from``, or one of
    ``ids`` (events announced as committed while it waited). With neither, only ``filters`` bound it.

    "Either" is a UNION of two index-friendly halves, not an OR: an OR would defeat partition pruning
    on received_at and the id index alike (hundreds of ms on a busy endpoint instead of one)."""
    args: list[object] = []
    halves = []
    if received_from is not None or not ids:
        where = _Where(endpoint_id, args).filters(filters)
        if received_from is not None:
            where.add("e.received_at >= {}", received_from)
        halves.append(where.sql)
    if ids:
        where = _Where(endpoint_id, args).filters(filters)
        where.add("e.id = any({}::text[])", ids)
        halves.append(where.sql)
    sql = " UNION ALL ".join(
        f"(SELECT {_COLUMNS} FROM events e WHERE {half} ORDER BY e.received_at, e.id LIMIT 1)" for half in halves
    )
    sql = f"SELECT * FROM ({sql}) m ORDER BY received_at, id LIMIT 1"
    if filters.search is None:
        return await conn.fetchrow(sql, *args)
    async with conn.transaction():
        await conn.execute(_CUSTOM_PLAN)
        return await conn.fetchrow(sql, *args)


async def first_stored_after(
    conn: Connection,
    endpoint_id: str,
    filters: EventFilters,
    *,
    xid: int,
    event_id: str = "",
    inclusive: bool = False,
) -> tuple[int, asyncpg.Record | None]:
    """(horizon, the first match stored after the position ``(xid, event_id)``, or at it when ``inclusive``),
    in storing order (``stored_xid``, then id), read in one snapshot. ``horizon`` is that snapshot's
    ``control.db.follow_horizon``: every transaction below it that could store an event had finished, so no
    event with a smaller ``stored_xid`` can appear any more; a match at or above it is visible but not yet safe
    to move past.

    The match carries ``position_xid``. Events stored before migration 0013 (no ``stored_xid``) are never
    matched."""
    where = _Where(endpoint_id).filters(filters)
    bound = where.arg(xid)
    where.parts.append(f"e.stored_xid >= {bound}::xid8")
    where.add(f"(e.stored_xid > {bound}::xid8 OR e.id {'>=' if inclusive else '>'} {{}})", event_id)
    row = returned(
        await conn.fetchrow(
            f"""SELECT {horizon("m.position_xid")} AS horizon, m.*
              FROM {SNAPSHOT}
              LEFT JOIN LATERAL (
                  SELECT {_COLUMNS}, e.stored_xid::text::bigint AS position_xid FROM events e
                   WHERE {where.sql} ORDER BY e.stored_xid, e.id LIMIT 1) m ON true""",
            *where.args,
        )
    )
    return row["horizon"], (row if row["id"] is not None else None)


async def now_position(conn: Connection) -> int:
    """The position "now" in storing order: the snapshot's xmax, the first transaction id not yet started.
    Not xmin: an unrelated transaction left open (another endpoint's flush, another database on the server)
    holds xmin back, and an event committed before "now" would then count as after it. A transaction in
    progress at the read (between xmin and xmax) counts as before: it read its batch before "now", so its
    events were received before it."""
    found: int = await conn.fetchval("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
    return found


async def stored_xid(conn: Connection, endpoint_id: str, event_id: str) -> int | None:
    """The id of the transaction that stored the endpoint's event; None while the event is not stored."""
    found: int | None = await conn.fetchval(
        "SELECT e.stored_xid::text::bigint FROM events e WHERE e.id = $1 AND e.endpoint_id = $2 LIMIT 1",
        event_id,
        endpoint_id,
    )
    return found


async def get_for_account(conn: Connection, account_id: str, event_id: str) -> asyncpg.Record | None:
    """By id through the primary key (id, received_at) of every partition; the endpoint join scopes it to the
    account."""
    return await conn.fetchrow(
        f"""SELECT {_COLUMNS} FROM events e JOIN endpoints p ON p.id = e.endpoint_id
            WHERE e.id = $1 AND p.account_id = $2
            LIMIT 1""",
        event_id,
        account_id,
    )
