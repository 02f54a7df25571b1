"""Destinations: where an endpoint's rules forward events. Creating one may create its rule too.

URLs are checked for shape (absolute http/https) and, under ``HOOKYARD_EGRESS=public``, for a host every
delivery would be refused for as written (an internal IP literal, ``localhost``: ``check_outbound_url``).
What a name resolves to is the egress policy's business at connect time, so a destination whose name
resolves to a private address can be stored and is refused (or not) when delivered to. Custom headers are
refused when the delivery itself owns them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import asyncpg
import msgspec

from control.db import destinations as db_destinations
from control.db import rules as db_rules
from control.db.context import Context, Principal
from control.records.destination_auth import DestinationAuth, MtlsAuth
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
from control.service.destinations.auth import (
    auth_columns,
    check_auth,
    check_https,
    check_tls_ca,
    credentials_in_url,
    new_auth_version,
)
from control.service.destinations.signing import new_signing_secret
from control.service.destinations.view import destination_record, not_found
from control.service.endpoints import endpoint_rows, lock_owned, require_endpoint, require_owned, require_write
from control.service.rules import check_regex_budget, check_rule_count, rule_record
from control.service.stats import destination_health
from control.service.transforms import check_transform
from control.support import sealing
from control.support.text_checks import check_name
from control.support.url_checks import check_outbound_url
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
    "create_destination",
    "delete_destination",
    "get_destination",
    "list_destinations",
    "update_destination",
)

MAX_DESTINATIONS = 100
"""Per endpoint."""
FORWARD_ALL: dict[str, Any] = {"op": "AND", "children": []}
"""The tree of a ``forward_all`` rule: an empty AND group matches every event."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")  # visible ASCII, space and tab: what every HTTP stack sends as is


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
    found: str | None = leaf["field"]
    return found


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
        rows = await endpoint_rows(conn, principal, endpoint_id, db_destinations.list_for_endpoint)
    return DestinationList(destinations=[destination_record(r) for r in rows])


async def get_destination(ctx: Context, principal: Principal, destination_id: str) -> DestinationDetail:
    """The destination with its health (``control.service.stats``)."""
    async with ctx.pool.acquire() as conn:
        row = await require_owned(
            conn, principal, destination_id, kind="dst", noun="destination", get=db_destinations.get
        )
        health = await destination_health(ctx, conn, row["endpoint_id"], destination_id)
    if health is None:  # deleted meanwhile
        raise not_found(destination_id)
    return DestinationDetail(**msgspec.structs.asdict(destination_record(row)), health=health)


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
    url, auth = _credentials(check_outbound_url(data.url, ctx.settings.egress), data.auth)
    shown = None if auth is None else check_auth(auth, ctx.settings.egress)
    tls_ca = None if data.tls_ca is None else check_tls_ca(data.tls_ca)
    check_https(url, mtls=isinstance(auth, MtlsAuth), tls_ca=tls_ca is not None)
    check_name(data.name, "name")
    headers = check_headers(data.headers)
    tree = _rule_tree(data)
    shaping = {
        "rate_limit_per_s": data.rate_limit_per_s,
        "ordering": data.ordering,
        "ordering_key": check_ordering_key(data.ordering_key, data.ordering),
        "deduplicate_window_s": data.deduplicate_window_s,
    }
    transform = await check_transform(ctx, principal, data.transform)
    secret, public_key = new_signing_secret(data.signing_scheme)
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
            await check_regex_budget(conn, endpoint_id, tree)
        destination_id = ids.new_id("dst")
        row = await db_destinations.insert(
            conn,
            destination_id=destination_id,
            endpoint_id=endpoint_id,
            name=data.name,
            url=url,
            headers=headers,
            signing_secret=sealing.seal_destination_secret(ctx, destination_id, secret),
            sign_deliveries=data.sign_deliveries,
            shaping=shaping,
            transform=transform,
            propagate_trace=data.propagate_trace,
            auth={
                **auth_columns(ctx, destination_id, auth, shown),
                "tls_ca": tls_ca,
                "auth_version": None if auth is None and tls_ca is None else new_auth_version(),
            },
            signing_public_key=public_key,
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
    shown_secret = None if public_key is not None else secret  # an Ed25519 key never leaves hookyard
    created = DestinationCreated(**msgspec.structs.asdict(destination_record(row)), signing_secret=shown_secret)
    if rule is not None:
        created.rule = rule_record(rule)
    return created


async def update_destination(
    ctx: Context, principal: Principal, destination_id: str, data: DestinationUpdate
) -> Destination:
    require_write(principal)
    changes = {f: v for f in data.__struct_fields__ if (v := getattr(data, f)) is not msgspec.UNSET}
    egress = ctx.settings.egress
    if "url" in changes:
        changes["url"], from_url = _credentials(check_outbound_url(changes["url"], egress), changes.get("auth"))
        if from_url is not None:
            changes["auth"] = from_url
    auth_given, tls_given = "auth" in changes, "tls_ca" in changes
    shown = None if changes.get("auth") is None else check_auth(changes["auth"], egress)
    if changes.get("tls_ca") is not None:
        changes["tls_ca"] = check_tls_ca(changes["tls_ca"])
    check_name(changes.get("name"), "name")
    if "headers" in changes:
        changes["headers"] = check_headers(changes["headers"])
    if changes.get("ordering_key") is not None:
        changes["ordering_key"] = check_ordering_key(changes["ordering_key"], changes.get("ordering"))
    if changes.get("ordering") == "none" and "ordering_key" not in changes:
        changes["ordering_key"] = None  # a key means nothing without FIFO ordering
    if "transform" in changes:
        changes["transform"] = await check_transform(ctx, principal, changes["transform"])
    if not ids.is_id(destination_id, "dst"):
        raise not_found(destination_id)
    async with ctx.pool.acquire() as conn, conn.transaction():
        if "url" in changes or auth_given or tls_given:
            current = await db_destinations.for_update(conn, principal.account_id, destination_id)
            if current is None:
                raise not_found(destination_id)
            auth_type = (shown or {}).get("type") if auth_given else current["auth_type"]
            tls_ca = changes["tls_ca"] if tls_given else current["tls_ca"]
            check_https(changes.get("url", current["url"]), mtls=auth_type == "mtls", tls_ca=tls_ca is not None)
            if auth_given or tls_given:
                if auth_given:
                    changes.update(auth_columns(ctx, destination_id, changes.pop("auth"), shown))
                changes["auth_version"] = None if auth_type is None and tls_ca is None else new_auth_version()
        try:
            row = await db_destinations.update(conn, principal.account_id, destination_id, changes)
        except asyncpg.CheckViolationError as exc:
            if exc.constraint_name != "destinations_ordering_key_needs_fifo":
                raise
            raise ValidationError(_KEY_NEEDS_FIFO) from None
        if row is None:
            raise not_found(destination_id)
        await require_endpoint(conn, principal, row["endpoint_id"])  # expired: 410, and the change rolls back
    return destination_record(row)


def _credentials(url: str, auth: DestinationAuth | None) -> tuple[str, DestinationAuth | None]:
    """The URL to store and the auth to use: a URL's ``user:pass@`` is ``auth`` of type ``basic``."""
    url, from_url = credentials_in_url(url)
    if from_url is None:
        return url, auth
    if auth is not None:
        raise ValidationError("url: has user:password@ and auth is given too; give the credentials in auth alone")
    return url, from_url


async def delete_destination(ctx: Context, principal: Principal, destination_id: str) -> DestinationDeleted:
    """Deletes the destination, its pending deliveries, and the rules left without any destination (a rule
    forwards to at least one); rules that still have other destinations just lose this one."""
    require_write(principal)
    async with ctx.pool.acquire() as conn, conn.transaction():
        await lock_owned(conn, principal, destination_id, kind="dst", noun="destination", lock=db_destinations.lock)
        deleted_rules = await db_destinations.delete(conn, destination_id)
    return DestinationDeleted(id=destination_id, deleted_rule_ids=deleted_rules)
