"""Destinations: where an endpoint's rules forward events. Creating one may create its rule too.

URLs are checked for shape only (absolute http/https); which addresses may be reached is the egress
policy's business at connect time, so a destination on a private address can be stored and is refused
(or not) when delivered to. Custom headers are refused when the delivery itself owns them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import msgspec

from control.db import destinations as db_destinations
from control.db import rules as db_rules
from control.records.destinations import (
    MAX_HEADER_VALUE,
    MAX_HEADERS,
    RESERVED_HEADERS,
    RESERVED_PREFIX,
    Destination,
    DestinationCreate,
    DestinationCreated,
    DestinationDeleted,
    DestinationDetail,
    DestinationList,
    DestinationUpdate,
)
from control.records.storable import check_text
from control.routing import conditions
from control.service import Context, Principal, sealed
from control.service.endpoints import require_endpoint, require_write
from control.service.rules import check_rule_count, rule_record
from control.service.stats import destination_health
from control.service.text import check_name
from control.service.transforms import check_transform
from shared import ids
from shared.errors import NotFoundError, ValidationError
from shared.logs import safe_url

__all__ = (
    "FORWARD_ALL",
    "MAX_DESTINATIONS",
    "MAX_HEADERS",
    "RESERVED_HEADERS",
    "check_headers",
    "check_ordering_key",
    "check_url",
    "create_destination",
    "delete_destination",
    "get_destination",
    "list_destinations",
    "rotate_destination_secret",
    "update_destination",
)

MAX_DESTINATIONS = 100
"""Per endpoint."""
FORWARD_ALL: dict[str, Any] = {"op": "AND", "children": []}
"""The tree of a ``forward_all`` rule: an empty AND group matches every event."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")  # visible ASCII, space and tab: what every HTTP stack sends as is


def _destination(row: asyncpg.Record) -> Destination:
    return Destination(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        name=row["name"],
        url=row["url"],
        headers=row["headers"],
        sign_deliveries=row["sign_deliveries"],
        rate_limit_per_s=row["rate_limit_per_s"],
        ordering=row["ordering"],
        ordering_key=row["ordering_key"],
        deduplicate_window_s=row["deduplicate_window_s"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        transform=row["transform"],
    )


def _not_found(destination_id: str) -> NotFoundError:
    return NotFoundError(f"destination {destination_id!r} not found")


def check_url(url: str, *, where: str = "url") -> str:
    """An absolute http(s) URL with a host, as given; ValidationError naming ``where`` otherwise."""
    check_text(url, where)
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise ValidationError(f"{where}: must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ValidationError(f"{where}: not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{where}: must be an absolute http or https URL, e.g. https://example.com/hooks")
    if port == 0:
        raise ValidationError(f"{where}: port 0 cannot be connected to")
    return url


_KEY_NEEDS_FIFO = 'ordering_key: only with ordering "fifo" (set both, or clear ordering_key)'


def check_ordering_key(key: str | None, ordering: str | None) -> str | None:
    """The ordering key as stored (header names lowercased), or ValidationError naming ``ordering_key``: a
    field in the condition-tree syntax, and only with FIFO ordering (``ordering`` None: not given, and the
    stored value decides, which the database's check enforces)."""
    if key is None:
        return None
    if ordering == "none":
        raise ValidationError(_KEY_NEEDS_FIFO)
    check_text(key, "ordering_key")
    try:
        leaf = conditions.validate({"field": key, "operator": "exists"}, path="ordering_key")
    except conditions.InvalidConditionTree as exc:  # "ordering_key.field: ..." names the leaf's part
        raise ValidationError(str(exc).replace("ordering_key.field:", "ordering_key:", 1)) from None
    return leaf["field"]


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """The headers with lowercased names; refuses invalid names and values, duplicates that differ only in
    case, and headers the delivery owns (hop-by-hop, ``host``, ``content-length``, ``x-hookyard-*``)."""
    if headers is None:
        return None
    if len(headers) > MAX_HEADERS:
        raise ValidationError(f"headers: at most {MAX_HEADERS} headers")
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or len(name) > 256:
            shown = name if len(name) <= 100 else name[:100] + "…"
            raise ValidationError(f"headers: {shown!r} is not a valid header name")
        lower = name.lower()
        where = f"headers.{name}"
        if lower in RESERVED_HEADERS or lower.startswith(RESERVED_PREFIX):
            raise ValidationError(f"{where}: set by hookyard on every delivery, it cannot be overridden")
        if lower in out:
            raise ValidationError(f"{where}: given twice (header names are case-insensitive)")
        if len(value) > MAX_HEADER_VALUE:
            raise ValidationError(f"{where}: longer than {MAX_HEADER_VALUE} characters")
        if not _FIELD_VALUE.fullmatch(value):
            raise ValidationError(f"{where}: only visible ASCII characters, spaces and tabs are allowed")
        out[lower] = value.strip(" \t")
    return out


async def list_destinations(ctx: Context, principal: Principal, endpoint_id: str) -> DestinationList:
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        rows = await db_destinations.list_for_endpoint(conn, endpoint_id)
    return DestinationList(destinations=[_destination(r) for r in rows])


async def get_destination(ctx: Context, principal: Principal, destination_id: str) -> DestinationDetail:
    """The destination with its health (``control.service.stats``)."""
    if not ids.is_id(destination_id, "dst"):
        raise _not_found(destination_id)
    async with ctx.pool.acquire() as conn:
        row = await db_destinations.get(conn, principal.account_id, destination_id)
        if row is not None:
            await require_endpoint(conn, principal, row["endpoint_id"])
        health = None if row is None else await destination_health(ctx, conn, row["endpoint_id"], destination_id)
    if row is None or health is None:  # unknown, another account's, or deleted meanwhile
        raise _not_found(destination_id)
    return DestinationDetail(**msgspec.structs.asdict(_destination(row)), health=health)


def _rule_tree(data: DestinationCreate) -> dict[str, Any] | None:
    check_name(data.rule_name, "rule_name")
    given = data.condition_tree is not msgspec.UNSET and data.condition_tree is not None
    if data.forward_all and given:
        raise ValidationError(
            "forward_all: cannot be combined with condition_tree; forward_all is the tree that matches every event"
        )
    tree = FORWARD_ALL if data.forward_all else conditions.validate(data.condition_tree) if given else None
    if tree is None and data.rule_name is not None:
        raise ValidationError("rule_name: only with forward_all or condition_tree, which create the rule it names")
    return tree


async def create_destination(
    ctx: Context, principal: Principal, endpoint_id: str, data: DestinationCreate
) -> DestinationCreated:
    """The destination and, with ``forward_all`` or ``condition_tree``, its rule: one transaction."""
    require_write(principal)
    url = check_url(data.url)
    check_name(data.name, "name")
    headers = check_headers(data.headers)
    tree = _rule_tree(data)
    shaping = {
        "rate_limit_per_s": data.rate_limit_per_s,
        "ordering": data.ordering,
        "ordering_key": check_ordering_key(data.ordering_key, data.ordering),
        "deduplicate_window_s": data.deduplicate_window_s,
    }
    transform = await check_transform(data.transform)
    secret = ids.signing_secret()
    if not ids.is_id(endpoint_id, "ep"):
        raise NotFoundError(f"endpoint {endpoint_id!r} not found")
    async with ctx.pool.acquire() as conn, conn.transaction():
        await require_endpoint(conn, principal, endpoint_id)
        if not await db_rules.lock_routing(conn, principal.account_id, endpoint_id):
            raise NotFoundError(f"endpoint {endpoint_id!r} not found")
        if await db_destinations.count_for_endpoint(conn, endpoint_id) >= MAX_DESTINATIONS:
            raise ValidationError(
                f"endpoint {endpoint_id!r} already has {MAX_DESTINATIONS} destinations, the most it can have"
            )
        if tree is not None:
            await check_rule_count(conn, endpoint_id)
        destination_id = ids.new_id("dst")
        row = await db_destinations.insert(
            conn,
            destination_id=destination_id,
            endpoint_id=endpoint_id,
            name=data.name,
            url=url,
            headers=headers,
            signing_secret=sealed.seal_destination_secret(ctx, destination_id, secret),
            sign_deliveries=data.sign_deliveries,
            shaping=shaping,
            transform=transform,
        )
        rule = None
        if tree is not None:
            # Not the whole URL: a rule name is shown and logged, and the URL may be the secret (Slack, ?token=).
            rule_name = data.rule_name or f"forward to {data.name or safe_url(url)}"
            rule = await db_rules.insert(
                conn,
                rule_id=ids.new_id("rule"),
                endpoint_id=endpoint_id,
                name=rule_name[:200],
                condition_tree=tree,
                active=True,
                destination_ids=[row["id"]],
            )
    created = DestinationCreated(**msgspec.structs.asdict(_destination(row)), signing_secret=secret)
    if rule is not None:
        created.rule = rule_record(rule)
    return created


async def update_destination(
    ctx: Context, principal: Principal, destination_id: str, data: DestinationUpdate
) -> Destination:
    require_write(principal)
    changes = {f: v for f in data.__struct_fields__ if (v := getattr(data, f)) is not msgspec.UNSET}
    if "url" in changes:
        changes["url"] = check_url(changes["url"])
    check_name(changes.get("name"), "name")
    if "headers" in changes:
        changes["headers"] = check_headers(changes["headers"])
    if changes.get("ordering_key") is not None:
        changes["ordering_key"] = check_ordering_key(changes["ordering_key"], changes.get("ordering"))
    if changes.get("ordering") == "none" and "ordering_key" not in changes:
        changes["ordering_key"] = None  # a key means nothing without FIFO ordering
    if "transform" in changes:
        changes["transform"] = await check_transform(changes["transform"])
    if not ids.is_id(destination_id, "dst"):
        raise _not_found(destination_id)
    async with ctx.pool.acquire() as conn, conn.transaction():
        try:
            row = await db_destinations.update(conn, principal.account_id, destination_id, changes)
        except asyncpg.CheckViolationError as exc:
            if exc.constraint_name != "destinations_ordering_key_needs_fifo":
                raise
            raise ValidationError(_KEY_NEEDS_FIFO) from None
        if row is None:
            raise _not_found(destination_id)
        await require_endpoint(conn, principal, row["endpoint_id"])  # expired: 410, and the change rolls back
    return _destination(row)


async def rotate_destination_secret(ctx: Context, principal: Principal, destination_id: str) -> DestinationCreated:
    """A new signing secret for the destination's deliveries, effective for the next attempt; returned once."""
    require_write(principal)
    if not ids.is_id(destination_id, "dst"):
        raise _not_found(destination_id)
    secret = ids.signing_secret()
    async with ctx.pool.acquire() as conn, conn.transaction():
        stored = sealed.seal_destination_secret(ctx, destination_id, secret)
        row = await db_destinations.rotate_secret(conn, principal.account_id, destination_id, stored)
        if row is None:
            raise _not_found(destination_id)
        await require_endpoint(conn, principal, row["endpoint_id"])  # expired: 410, and the change rolls back
    return DestinationCreated(**msgspec.structs.asdict(_destination(row)), signing_secret=secret)


async def delete_destination(ctx: Context, principal: Principal, destination_id: str) -> DestinationDeleted:
    """Deletes the destination, its pending deliveries, and the rules left without any destination (a rule
    forwards to at least one); rules that still have other destinations just lose this one."""
    require_write(principal)
    if not ids.is_id(destination_id, "dst"):
        raise _not_found(destination_id)
    async with ctx.pool.acquire() as conn, conn.transaction():
        endpoint_id = await db_destinations.lock(conn, principal.account_id, destination_id)
        if endpoint_id is None:
            raise _not_found(destination_id)
        await require_endpoint(conn, principal, endpoint_id)
        deleted_rules = await db_destinations.delete(conn, destination_id)
    return DestinationDeleted(id=destination_id, deleted_rule_ids=deleted_rules)
