"""The routing step of the flush: each event × its endpoint's active rules → the delivery tasks to create.

Runs before the flush's insert, on the connection of its transaction: the decided tasks travel with their
events into the staging table, and the one statement that inserts the events creates the tasks of those
that are actually new (``control.db.flush.store_batch``). So events and their tasks commit together, a
re-processed stream entry (whose events already exist) creates nothing, and the unique
(event, rule, destination) key makes even a repeated insert harmless. The insert NOTIFYs the deliver
workers at commit.

Rules are compiled once and cached per endpoint (including "no rules", the common case) together with the
endpoint's ``config_version``, which Postgres bumps on every change of its rules, destinations or routed
columns (migration 0005). Each batch asks for the versions of its endpoints (one query, in the batch's
transaction, after its entries were read from the stream: so after every change whose 2xx preceded one of
its events) and reloads only the endpoints whose version moved. A change is thus in force for every event
acknowledged after it answered, with no message to lose and no expiry to wait for. Events with
``ip_allowed = false`` are never routed. When every rule of an endpoint matches every event (forward-all),
no event is even looked at; otherwise a body is parsed as JSON (once per event) only when some rule reads
``body``, and the meta keys are gathered only when some rule reads ``meta.*``.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgspec

from control.db import labels as db_labels
from control.db import routing as db_routing
from control.db.connection import Connection
from control.db.context import Context
from control.records.storable import EventRow
from control.routing.conditions import ALWAYS, LABEL_PREFIX, META_KEYS, MISSING, EventView, compile_tree
from control.routing.conditions.validation import MAX_ENCODED_BYTES
from control.routing.labels import LabelRule, compile_label, labels_of, with_labels
from control.routing.shaping import NO_KEYS, Shaping, compile_shaping, position
from shared.bytes_lru import BytesLRU
from shared.ids import new_id

__all__ = ("Router",)

log = logging.getLogger("hookyard.routing")

# Meta keys read straight from the event row; endpoint_id and environment are set per endpoint below.
_META = tuple((name, EventRow._fields.index(name)) for name in META_KEYS if name not in ("endpoint_id", "environment"))
_NO_META: Mapping[str, object] = MappingProxyType({})
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.encode
_third = operator.itemgetter(2)
_MAX_CACHED_BYTES = 64 * 1024 * 1024
"""What the endpoints' compiled rules a worker keeps may weigh; past it the least recently used endpoint's
are dropped (a reload of that endpoint). Rules are tenant text: a tree may be 64 KiB of JSON."""
_MAX_COMPILED_BYTES = 64 * 1024 * 1024
"""What the rules' compiled trees (by rule id) may weigh."""
_PER_TREE_BYTE = 40
"""What a tree held compiled costs per byte of its JSON: the closures (``compilation``: 32) and the decoded
tree kept beside them to tell a changed rule."""


@dataclass(frozen=True, slots=True)
class _Rule:
    id: str
    matches: Any  # Callable[[EventView], bool]
    destination_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _EndpointRules:
    weight: int
    """What it holds, in bytes (its trees at ``_PER_TREE_BYTE``, ids and labels): the cache's measure."""
    environment: str
    rules: tuple[_Rule, ...]
    needs_body: bool
    needs_meta: bool
    fixed: tuple[tuple[str, str], ...] | None
    """(rule id, destination id) of every task when every rule matches every event, else None."""
    version: int
    """The endpoint's ``config_version`` these rules were read at."""
    labels: tuple[LabelRule, ...] = ()
    """Label rules, applied to every event before routing (``control.routing.labels``)."""
    shaping: Mapping[str, Shaping] = field(default_factory=dict)
    """Destinations whose tasks carry ordering or deduplication keys (``control.routing.shaping``)."""


def _reads(tree: object, kind: str) -> bool:
    """Whether any leaf of the tree has a field of this kind (``body``, ``body.*``; ``meta.*``)."""
    if isinstance(tree, Mapping):
        field = tree.get("field")
        if isinstance(field, str) and field.split(".", 1)[0] == kind:
            return True
        return any(_reads(child, kind) for child in tree.get("children") or ())
    return False


def _weight_of(rules: _EndpointRules) -> int:
    return rules.weight


def _tree_bytes(tree: object) -> int:
    try:
        return len(_encode(tree))
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return MAX_ENCODED_BYTES  # what a stored tree may be at most


def _endpoint_rules(
    environment: str,
    rules: list[tuple[_Rule, object]],
    version: int,
    labels: tuple[LabelRule, ...],
    shaping: Mapping[str, Shaping],
) -> _EndpointRules:
    fixed = None
    if rules and all(rule.matches is ALWAYS for rule, _ in rules):
        fixed = tuple((rule.id, d) for rule, _ in rules for d in rule.destination_ids)
    reads = {s.reads for s in shaping.values()}
    weight = 1024 + 256 * (len(labels) + len(shaping))
    for rule, tree in rules:
        weight += 256 + 64 * len(rule.destination_ids) + _PER_TREE_BYTE * _tree_bytes(tree)
    return _EndpointRules(
        weight,
        environment,
        tuple(rule for rule, _ in rules),
        any(_reads(tree, "body") for _, tree in rules) or any(label.reads_body for label in labels) or "body" in reads,
        any(_reads(tree, "meta") for _, tree in rules) or "meta" in reads,
        fixed,
        version,
        labels,
        MappingProxyType(dict(shaping)),
    )


class Router:
    """One per worker process, shared by its flush lanes. Each batch routes with the rules it checked (or
    loaded) itself, so a lane that loaded older rules can never hand them to a batch read after a change."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._shards = {stream: i for i, stream in enumerate(ctx.keys.ingest_streams())}
        self._cache: BytesLRU[str, _EndpointRules] = BytesLRU(_MAX_CACHED_BYTES, size=_weight_of)
        # rule id → (tree, predicate, weight)
        self._compiled: BytesLRU[str, tuple[object, Any, int]] = BytesLRU(_MAX_COMPILED_BYTES, size=_third)

    async def route(
        self,
        conn: Connection,
        rows: Sequence[EventRow],
        entries: Sequence[tuple[str, str, object]] | None = None,
    ) -> tuple[Sequence[EventRow], list[tuple[Any, ...]]]:
        """``rows`` with their labels, and the delivery tasks they make, as
        ``TASK_COLUMNS`` tuples ``(task id, event id, rule id, destination id)``, or, when an endpoint of the
        batch has a destination that shapes its deliveries, every task with its ``(order_key, order_pos,
        dedup_key)`` too (``control.routing.shaping``). ``entries``: the stream entry ``(stream, entry id,
        ...)`` each row came from, for the FIFO position (none: no position).

        Labels come first, so conditions can read them (``meta.label.<key>``). Decides for every row; the
        insert keeps only the tasks of events that turn out to be new.
        """
        if not rows:
            return rows, []
        current = await self._current(conn, {row.endpoint_id for row in rows})
        labelling = any(c.labels for c in current.values())
        if not labelling and not any(c.rules for c in current.values()):
            return rows, []
        if any(c.shaping for c in current.values()):
            return self._route_shaped(rows, current, labelling, entries)
        labelled: list[EventRow] = []
        tasks: list[tuple[Any, ...]] = []
        append = tasks.append
        for row in rows:
            endpoint = current.get(row.endpoint_id)
            view = None
            if endpoint is not None and endpoint.labels:
                row, view = self._label(row, endpoint)
            if labelling:
                labelled.append(row)
            # A blocked source's event and a provider's handshake (answered at the edge) are never delivered.
            if endpoint is None or not endpoint.rules or row.ip_allowed is False or row.handshake:
                continue
            pairs = endpoint.fixed if endpoint.fixed is not None else self._match(row, endpoint, view)
            event_id = row.id
            for rule_id, destination_id in pairs:
                append((new_id("task"), event_id, rule_id, destination_id))
        return (labelled if labelling else rows), tasks

    def _route_shaped(
        self,
        rows: Sequence[EventRow],
        current: Mapping[str, _EndpointRules],
        labelling: bool,
        entries: Sequence[tuple[str, str, object]] | None,
    ) -> tuple[Sequence[EventRow], list[tuple[Any, ...]]]:
        """``route`` for a batch with shaping destinations: the same decisions, each task with its keys."""
        out: list[EventRow] = []
        tasks: list[tuple[Any, ...]] = []
        for index, row in enumerate(rows):
            endpoint = current.get(row.endpoint_id)
            view = None
            if endpoint is not None and endpoint.labels:
                row, view = self._label(row, endpoint)
            if labelling:
                out.append(row)
            # A blocked source's event and a provider's handshake (answered at the edge) are never delivered.
            if endpoint is None or not endpoint.rules or row.ip_allowed is False or row.handshake:
                continue
            if endpoint.fixed is not None:
                pairs: Sequence[tuple[str, str]] = endpoint.fixed
            else:
                if view is None:
                    view = self._view(row, endpoint)
                pairs = self._match(row, endpoint, view)
            event_id = row.id
            for rule_id, destination_id in pairs:
                shaping = endpoint.shaping.get(destination_id)
                keys: tuple[str | None, str | None, str | None] = NO_KEYS
                if shaping is not None:
                    if view is None and shaping.key is not None:
                        view = self._view(row, endpoint)
                    pos = None
                    if shaping.fifo and entries is not None:
                        stream, entry_id = entries[index][0], entries[index][1]
                        pos = position(self._shards.get(stream, 0), entry_id)
                    keys = shaping.keys(view, row.idempotency_key, pos)
                tasks.append((new_id("task"), event_id, rule_id, destination_id, *keys))
        return (out if labelling else rows), tasks

    def _label(self, row: EventRow, endpoint: _EndpointRules) -> tuple[EventRow, EventView]:
        """The row with its labels, and the view routing reads it through (its labels in ``meta``)."""
        view = self._view(row, endpoint)
        labels = labels_of(endpoint.labels, view)
        if not labels:
            return row, view
        if endpoint.needs_meta:
            view = view._replace(
                meta={**view.meta, **{LABEL_PREFIX + label["key"]: label["value"] for label in labels}}
            )
        return with_labels(row, labels), view

    async def _current(self, conn: Connection, endpoint_ids: set[str]) -> dict[str, _EndpointRules]:
        """The rules of these endpoints as of now: cached ones whose version is still current, the rest
        reloaded. Deleted endpoints are left out (the insert drops their events)."""
        versions = await db_routing.config_versions(conn, endpoint_ids)
        cache = self._cache
        current: dict[str, _EndpointRules] = {}
        stale: list[str] = []
        for endpoint_id, version in versions.items():
            cached = cache.get(endpoint_id)
            if cached is not None and cached.version == version:
                current[endpoint_id] = cached
            else:
                stale.append(endpoint_id)
        if stale:
            current.update(await self._load(conn, stale))
        return current

    def _match(self, row: EventRow, endpoint: _EndpointRules, view: EventView | None) -> list[tuple[str, str]]:
        if view is None:
            view = self._view(row, endpoint)
        return [
            (rule.id, destination_id)
            for rule in endpoint.rules
            if rule.matches is ALWAYS or self._matches(rule, view, row.id)
            for destination_id in rule.destination_ids
        ]

    @staticmethod
    def _view(row: EventRow, endpoint: _EndpointRules) -> EventView:
        body: object = MISSING
        if endpoint.needs_body and row.body:
            try:
                body = _decode(row.body)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # too deep: not a JSON body
                body = MISSING
        meta = _NO_META
        if endpoint.needs_meta:
            meta = {name: row[index] for name, index in _META}
            meta["endpoint_id"] = row.endpoint_id
            meta["environment"] = endpoint.environment
        return EventView(body, row.headers, meta)

    @staticmethod
    def _matches(rule: _Rule, view: EventView, event_id: str) -> bool:
        try:
            return bool(rule.matches(view))
        except Exception:  # a broken predicate must not block the ingest stream: that rule is skipped
            log.exception("routing: rule %s failed on event %s; not routed by it", rule.id, event_id)
            return False

    async def _load(self, conn: Connection, endpoint_ids: list[str]) -> dict[str, _EndpointRules]:
        grouped: dict[str, tuple[str, int, list[tuple[_Rule, object]]]] = {}
        for row in await db_routing.active_rules(conn, endpoint_ids):
            _, _, rules = grouped.setdefault(row["endpoint_id"], (row["environment"], row["config_version"], []))
            if row["rule_id"] is None:
                continue
            predicate = self._predicate(row["rule_id"], row["condition_tree"])
            if predicate is not None:
                rules.append((_Rule(row["rule_id"], predicate, tuple(row["destination_ids"])), row["condition_tree"]))
        labels: dict[str, list[LabelRule]] = {}
        for row in await db_labels.for_endpoints(conn, list(grouped)):
            labels.setdefault(row["endpoint_id"], []).append(
                compile_label(row["source"], row["path"], row["output_key"], row["color"])
            )
        shaping = compile_shaping(await db_routing.shaping(conn, list(grouped)))
        loaded = {
            e: _endpoint_rules(environment, rules, v, tuple(labels.get(e, ())), shaping.get(e, {}))
            for e, (environment, v, rules) in grouped.items()
        }
        cache = self._cache
        for endpoint_id, endpoint_rules in loaded.items():
            cached = cache.get(endpoint_id)
            if cached is None or cached.version < endpoint_rules.version:  # another lane may have loaded newer ones
                cache.put(endpoint_id, endpoint_rules)
        return loaded

    def _predicate(self, rule_id: str, tree: object) -> Any:
        known = self._compiled.get(rule_id)
        if known is not None and known[0] == tree:
            return known[1]
        try:
            predicate = compile_tree(tree)  # type: ignore[arg-type]  # a stored tree: validated as a dict on write
        except Exception:  # stored trees were validated on write; one that still fails matches nothing
            log.exception("routing: condition tree of rule %s does not compile; the rule is skipped", rule_id)
            return None
        self._compiled.put(rule_id, (tree, predicate, _PER_TREE_BYTE * _tree_bytes(tree)))
        return predicate

    async def aclose(self) -> None:
        """Nothing to release (the router holds no connection); kept for the flush's shutdown."""
