"""What comparing text ids under the database's collation costs Postgres per delivered event: a harness.

Issue 48: profiling Postgres' backends showed strcoll under ``_bt_compare``. A database whose default collation
is libc's ``C.UTF-8`` (what initdb picks from ``LANG=C.UTF-8``, the embedded server's and most images') is
not the "C" fast path to Postgres: every comparison of two texts copies both to NUL-terminated buffers and
calls strcoll, and sorts get no abbreviated keys. This measures the flush, claim and record statements of
``bench.first_attempt``'s *today* path, and the events list, on databases side by side on one server:

- ``default``: the server's default collation (as every database of an install is today);
- ``dbc``: a database created with ``LC_COLLATE 'C'`` (the upper bound: every text column compares bytes);
- ``cols``: the default database migrated by this tree, so with migration 0040's ``COLLATE "C"`` on the ids
  and keys if this tree has it (``COLLATE_OLD_UPTO``: the version the ``default`` side stops at);
- ``icu``, ``icu+cols``: a database whose default collation is ICU's ``en-US`` (a brought server made with
  a linguistic locale), without and with 0040.

Rounds alternate the variants ABBA. Printed per delivered event: Postgres' backend CPU by step (store, claim,
record) from ``/proc/<pid>/schedstat``; then the events list (newest first, keyset pages, the filters) per
page. Run it under the bench lock: ``flock /work/bench.lock python -m bench.collation``
(``COLLATE_VARIANTS``, ``COLLATE_ROUNDS``, ``FIRST_ATTEMPT_EVENTS``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import uuid
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import redis.asyncio as aioredis

from bench import first_attempt as fa
from bench.delivery import route_to_sink
from bench.infra import OUT, _servers
from bench.setup import create_endpoint
from control.db import connect
from control.db.events import EventFilters, page
from control.db.migrate import _LOCK_KEY, available
from shared.settings import Settings, load_settings

VARIANTS = os.environ.get("COLLATE_VARIANTS", "default,cols").split(",")
ROUNDS = int(os.environ.get("COLLATE_ROUNDS", "4"))
OLD_UPTO = os.environ.get("COLLATE_OLD_UPTO", "0039_search_keys")
PAGES = 30
_LOCALES = {
    "default": "",
    "dbc": " LC_COLLATE 'C'",
    "icu": " LOCALE_PROVIDER icu ICU_LOCALE 'en-US'",
}
"""A variant is a database locale, ``+cols`` for this tree's migrations (``cols`` alone: the default's)."""


async def _admin(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _migrate_upto(dsn: str, upto: str | None) -> None:
    """This tree's migrations in order, stopping after ``upto`` (None: all of them)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        for version, sql in available():
            if upto is not None and version > upto:
                break
            async with conn.transaction():
                await conn.execute(sql)
    finally:
        await conn.close()


class Side:
    """One database, its route to a sink and its connection; the flush group's stream in Redis."""

    def __init__(self, name: str, settings: Settings) -> None:
        self.name, self.settings = name, settings
        self.steps: dict[str, list[float]] = {"store": [], "claim": [], "record": [], "pg": [], "client": []}
        self.pages: dict[str, list[float]] = {}

    async def open(self, redis_url: str) -> None:
        self.endpoint = (await create_endpoint(self.settings)).id
        url = self.settings.database_url or ""
        self.dst, self.rule = await route_to_sink(url, self.endpoint, "http://127.0.0.1:9/hook")
        self.conn = await connect(url)
        self.redis = aioredis.Redis.from_url(redis_url)
        self.stream = f"{self.settings.redis_prefix}{{h}}"
        await self.redis.xgroup_create(self.stream, "flush", id="0", mkstream=True)
        self.backend = await self.conn.fetchval("SELECT pg_backend_pid()")
        self.redis_pid = int((await self.redis.info("server"))["process_id"])

    async def round(self) -> None:
        m = fa.Meter(self.backend, self.redis_pid)
        done = await fa._today(self.conn, self.redis, m, self.stream, self.endpoint, self.dst, self.rule)
        assert done == fa.EVENTS, (self.name, done)
        for k, v in m.steps.items():
            self.steps[k].append(v / 1000 / done)
        self.steps["pg"].append(m.total["pg"] / 1000 / done)
        self.steps["client"].append(m.total["client"] / 1000 / done)

    async def lists(self) -> list[tuple[datetime, str]]:
        """Backend CPU per page: the newest page, ``PAGES`` keyset pages, the provider and type filters."""
        keys: list[tuple[datetime, str]] = []

        async def timed(name: str, filters: EventFilters, after: tuple[datetime, str] | None) -> list:
            before = fa._cpu_ns(self.backend)
            rows = await page(self.conn, self.endpoint, filters, limit=50, after=after)
            self.pages.setdefault(name, []).append((fa._cpu_ns(self.backend) - before) / 1000)
            return rows

        after = None
        for _ in range(PAGES):
            rows = await timed("keyset", EventFilters(), after)
            keys += [(r["received_at"], r["id"]) for r in rows]
            after = keys[-1]
        first = await self.conn.fetchrow(
            "SELECT provider, event_type FROM events WHERE endpoint_id = $1 LIMIT 1", self.endpoint
        )
        for _ in range(5):
            await timed("provider", EventFilters(provider=first["provider"]), None)
            await timed("event_type", EventFilters(event_type=first["event_type"]), None)
        return keys

    async def close(self) -> None:
        await self.conn.close()
        await self.redis.aclose()


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.1f}" if xs else "   -  "


async def _run(database_url: str, redis_url: str) -> None:
    admin = urlunsplit(urlsplit(database_url)._replace(path="/postgres"))
    sides: list[Side] = []
    names = []
    try:
        for v in VARIANTS:
            name = f"hy_bench_coll_{v}_{uuid.uuid4().hex[:6]}"
            base, _, cols = v.partition("+")
            locale = _LOCALES[base if base != "cols" else "default"]
            await _admin(admin, f"CREATE DATABASE {name.replace('+', '_')} TEMPLATE template0{locale}")
            names.append(name.replace("+", "_"))
            dsn = urlunsplit(urlsplit(database_url)._replace(path="/" + names[-1]))
            await _migrate_upto(dsn, None if "cols" in (base, cols) else OLD_UPTO)
            prefix = f"hyb:{uuid.uuid4().hex[:8]}:"
            settings = load_settings({}, database_url=dsn, redis_url=redis_url, redis_prefix=prefix)
            side = Side(v, settings)
            await side.open(redis_url)
            sides.append(side)
        for side in sides:  # a first round per side fills its caches (catalog, plans): not counted
            await side.round()
            side.steps = {k: [] for k in side.steps}
        print(f"variants {VARIANTS}, {fa.EVENTS} events a round, load {os.getloadavg()[0]:.1f}; backends "
              + ", ".join(f"{s.name} {s.backend}" for s in sides), flush=True)  # fmt: skip
        for rnd in range(ROUNDS):
            order = sides if rnd % 2 == 0 else sides[::-1]
            for side in order:
                await side.round()
                print(f"round {rnd} {side.name:8} pg µs/delivered {side.steps['pg'][-1]:6.1f} "
                      f"store {side.steps['store'][-1]:5.1f} claim {side.steps['claim'][-1]:5.1f} "
                      f"record {side.steps['record'][-1]:5.1f} client {side.steps['client'][-1]:5.1f} "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        print("medians, µs per delivered event:")
        for s in sides:
            med = {k: _med(v) for k, v in s.steps.items()}
            print(f"  {s.name:8} pg {med['pg']} store {med['store']} claim {med['claim']} record {med['record']} "
                  f"client {med['client']}")  # fmt: skip
        orders = []
        for rnd in range(4):
            for side in sides if rnd % 2 == 0 else sides[::-1]:
                orders.append((side.name, await side.lists()))
        for s in sides:
            print(
                f"  {s.name:8} list µs of backend CPU per page (median): "
                + ", ".join(f"{k} {_med(v)}" for k, v in s.pages.items())
            )
        for name, keys in orders:
            assert keys == sorted(keys, reverse=True), name
            assert len(set(keys)) == len(keys), name
        print(f"keyset pages in (received_at, id) order and distinct on every side; load {os.getloadavg()[0]:.1f}")
        for s in sides:
            await s.close()
    finally:
        for name in names:
            await _admin(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    with _servers() as (database_url, redis_url):
        asyncio.run(_run(database_url, redis_url))
