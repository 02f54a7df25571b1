"""The routing step of the flush: new events × their endpoint's active rules → delivery tasks.

Runs inside the flush transaction that inserted the events, so events and their tasks commit together
and a re-processed stream entry (whose events already exist) creates nothing; the unique
(event, rule, destination) key makes even a repeated call harmless. The insert NOTIFYs the deliver workers
at commit.

Rules are compiled once and cached per endpoint (including "no rules", the common case, which then costs
a dict look-up per event). An entry is dropped when the endpoint's id arrives on ``keys.rules_channel``
(published after every rule or destination change) and after ``routing_cache_ttl_s`` at the latest, which
bounds staleness if a message is lost. Events with ``ip_allowed = false`` are never routed; a body is
parsed as JSON (once per event) only when some rule of its endpoint reads ``body.*``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
from redis.exceptions import RedisError

from control.db import routing as db_routing
from control.db import tasks as db_tasks
from control.db.flush import COLUMNS
from control.routing.conditions import META_KEYS, MISSING, EventView, compile_tree
from control.service import Context
from shared import ids

__all__ = ("Router",)

log = logging.getLogger("hookyard.routing")

_ID, _ENDPOINT, _RECEIVED, _HEADERS, _BODY = (
    COLUMNS.index(c) for c in ("id", "endpoint_id", "received_at", "headers", "body")
)
_IP_ALLOWED = COLUMNS.index("ip_allowed")
# Meta keys read straight from the event row; endpoint_id and environment are set per endpoint below.
_META = tuple((name, COLUMNS.index(name)) for name in META_KEYS if name not in ("endpoint_id", "environment"))
_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True, slots=True)
class _Rule:
    id: str
    matches: Any  # Callable[[EventView], bool]
    destination_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _EndpointRules:
    environment: str
    rules: tuple[_Rule, ...]
    needs_body: bool
    expires_at: float


def _reads_body(tree: object) -> bool:
    """Whether any leaf of the tree has a ``body`` or ``body.*`` field."""
    if isinstance(tree, Mapping):
        field = tree.get("field")
        if isinstance(field, str) and field.split(".", 1)[0] == "body":
            return True
        return any(_reads_body(child) for child in tree.get("children") or ())
    return False


class Router:
    """One per worker process, shared by its flush lanes."""

    def __init__(self, ctx: Context, *, ttl_s: float | None = None) -> None:
        self.ctx = ctx
        self.ttl_s = ctx.settings.routing_cache_ttl_s if ttl_s is None else ttl_s
        self._cache: dict[str, _EndpointRules] = {}
        self._compiled: dict[str, tuple[object, Any]] = {}  # rule id → (tree, predicate)
        self._pubsub: Any = None
        self._subscribe_after = 0.0  # monotonic time of the next subscription try after a failure
        self._reading = False

    async def route(self, conn: asyncpg.Connection, rows: Sequence[tuple], inserted: Sequence[asyncpg.Record]) -> int:
        """Creates the delivery tasks of the newly ``inserted`` events (``rows`` in flush ``COLUMNS`` order,
        a superset); returns how many tasks are new."""
        if not inserted:
            return 0
        await self._read_invalidations()
        now = time.monotonic()
        wanted = {r["endpoint_id"] for r in inserted}
        stale = [e for e in wanted if (c := self._cache.get(e)) is None or c.expires_at <= now]
        if stale:
            await self._load(conn, stale, now)
        if not any((c := self._cache.get(e)) is not None and c.rules for e in wanted):
            return 0
        by_id = {row[_ID]: row for row in rows}
        tasks: list[db_tasks.TaskRow] = []
        for record in inserted:
            endpoint = self._cache.get(record["endpoint_id"])
            row = by_id.get(record["id"])
            if endpoint is None or not endpoint.rules or row is None or row[_IP_ALLOWED] is False:
                continue
            view = self._view(row, endpoint)
            for rule in endpoint.rules:
                if self._matches(rule, view, row[_ID]):
                    for destination_id in rule.destination_ids:
                        task_id = ids.new_id("task")
                        tasks.append((task_id, row[_ENDPOINT], row[_ID], row[_RECEIVED], rule.id, destination_id))
        return await db_tasks.insert_tasks(conn, tasks)

    @staticmethod
    def _view(row: tuple, endpoint: _EndpointRules) -> EventView:
        body: object = MISSING
        if endpoint.needs_body and row[_BODY]:
            try:
                body = _decode(row[_BODY])
            except (msgspec.DecodeError, UnicodeDecodeError):
                body = MISSING
        meta = {name: row[index] for name, index in _META}
        meta["endpoint_id"] = row[_ENDPOINT]
        meta["environment"] = endpoint.environment
        return EventView(body=body, headers=row[_HEADERS], meta=meta)

    @staticmethod
    def _matches(rule: _Rule, view: EventView, event_id: str) -> bool:
        try:
            return bool(rule.matches(view))
        except Exception:  # a broken predicate must not block the ingest stream: that rule is skipped
            log.exception("routing: rule %s failed on event %s; not routed by it", rule.id, event_id)
            return False

    async def _load(self, conn: asyncpg.Connection, endpoint_ids: list[str], now: float) -> None:
        grouped: dict[str, tuple[str, list[_Rule], bool]] = {}
        for row in await db_routing.active_rules(conn, endpoint_ids):
            environment, rules, needs_body = grouped.setdefault(row["endpoint_id"], (row["environment"], [], False))
            if row["rule_id"] is None:
                continue
            predicate = self._predicate(row["rule_id"], row["condition_tree"])
            if predicate is not None:
                rules.append(_Rule(row["rule_id"], predicate, tuple(row["destination_ids"])))
                needs_body = needs_body or _reads_body(row["condition_tree"])
                grouped[row["endpoint_id"]] = (environment, rules, needs_body)
        for endpoint_id in endpoint_ids:
            environment, rules, needs_body = grouped.get(endpoint_id, ("", [], False))
            self._cache[endpoint_id] = _EndpointRules(environment, tuple(rules), needs_body, now + self.ttl_s)

    def _predicate(self, rule_id: str, tree: object) -> Any:
        known = self._compiled.get(rule_id)
        if known is not None and known[0] == tree:
            return known[1]
        try:
            predicate = compile_tree(tree)  # type: ignore[arg-type]
        except Exception:  # stored trees were validated on write; one that still fails matches nothing
            log.exception("routing: condition tree of rule %s does not compile; the rule is skipped", rule_id)
            return None
        if len(self._compiled) > 10_000:
            self._compiled.clear()
        self._compiled[rule_id] = (tree, predicate)
        return predicate

    async def _read_invalidations(self) -> None:
        """Drops the cache entries of endpoints announced on the rules channel (never blocks)."""
        if self._reading:  # another lane is reading the channel right now
            return
        self._reading = True
        try:
            if self._pubsub is None:
                if time.monotonic() < self._subscribe_after:
                    return
                self._pubsub = self.ctx.redis.pubsub()
                await self._pubsub.subscribe(self.ctx.keys.rules_channel)
                self._cache.clear()  # anything announced before the subscription was missed
            while (message := await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0)) is not None:
                data = message.get("data")
                self._cache.pop(data.decode() if isinstance(data, bytes) else str(data), None)
        except (RedisError, OSError) as exc:
            log.warning("routing: rules channel unavailable (%s); relying on the %ss cache TTL", exc, self.ttl_s)
            await self._drop_pubsub()
            self._cache.clear()
            self._subscribe_after = time.monotonic() + min(self.ttl_s, 5.0)
        finally:
            self._reading = False

    async def _drop_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                await pubsub.aclose()
            except (RedisError, OSError):
                log.debug("routing: closing the rules subscription failed", exc_info=True)

    async def aclose(self) -> None:
        await self._drop_pubsub()
