"""Label rules: which value of every new event becomes a tag ``{key, value, color}`` on it.

A rule reads a body path (the same dot paths as conditions' ``body.<path>``) or a header; the flush applies
an endpoint's rules to every event it stores after the rule exists (not retroactively: stored events are
never rewritten), before routing, so conditions can test ``meta.label.<key>``. Every change commits under
the endpoint's lock; the ``label_rules`` triggers bump the endpoint's config version, so the next batch the
flush stores is labelled under it (read-your-writes, as for rules).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import asyncpg
import msgspec

from control.db import labels as db_labels
from control.db import rules as db_rules
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records import Deleted
from control.records.labels import COLOR, OUTPUT_KEY, LabelRule, LabelRuleCreate, LabelRuleList, LabelRuleUpdate
from control.records.storable import check_text
from control.routing.conditions import MAX_FIELD_LENGTH
from control.service.endpoints import endpoint_rows, require_endpoint, require_owned, require_write
from control.support.parameter_messages import text_length
from shared import ids
from shared.errors import NotFoundError, ValidationError

__all__ = (
    "MAX_LABEL_RULES",
    "PALETTE",
    "check_path",
    "create_label",
    "delete_label",
    "get_label",
    "list_labels",
    "update_label",
)

MAX_LABEL_RULES = 50
"""Per endpoint: each is evaluated on every event the endpoint receives."""
PALETTE = ("#2563eb", "#16a34a", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
"""Colours of rules created without one: chosen by the key, so a key looks the same on every endpoint."""
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_OUTPUT_KEY = re.compile(OUTPUT_KEY)
_COLOR = re.compile(COLOR)


def default_color(output_key: str) -> str:
    return PALETTE[zlib.crc32(output_key.encode()) % len(PALETTE)]


def label_record(row: asyncpg.Record) -> LabelRule:
    return LabelRule(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        source=row["source"],
        path=row["path"],
        output_key=row["output_key"],
        color=row["color"],
        created_at=row["created_at"],
    )


def _not_found(label_id: str) -> NotFoundError:
    return NotFoundError(f"label rule {label_id!r} not found")


def check_path(source: str, path: str) -> str:
    """The path as stored: a body path as given (no empty segment), a header name lowercased."""
    check_text(path, "path")
    if not 1 <= len(path) <= MAX_FIELD_LENGTH:
        raise ValidationError(text_length("path", 1, MAX_FIELD_LENGTH, path))
    if source == "header":
        if not _HEADER_NAME.fullmatch(path):
            raise ValidationError(f"path: {path!r} is not a header name (an HTTP token, e.g. x-shop-domain)")
        return path.lower()
    if "" in path.split("."):
        raise ValidationError(f"path: empty segment in {path!r} (a dot path such as data.object.customer)")
    return path


def _check_key(output_key: str) -> str:
    check_text(output_key, "output_key")
    if not _OUTPUT_KEY.fullmatch(output_key):
        raise ValidationError("output_key: 1 to 64 letters, digits, _ or - (conditions read meta.label.<key>)")
    return output_key


def _check_color(color: str) -> str:
    check_text(color, "color")
    if not _COLOR.fullmatch(color):
        raise ValidationError(f"color: {color!r} is not a #rrggbb colour")
    return color.lower()


async def _check_unique(conn: Connection, endpoint_id: str, output_key: str, label_id: str | None) -> None:
    for row in await db_labels.list_for_endpoint(conn, endpoint_id):
        if row["output_key"] == output_key and row["id"] != label_id:
            raise ValidationError(
                f"output_key: {output_key!r} is taken: endpoint {endpoint_id!r} already has a label rule for it"
            )


async def _lock(conn: Connection, principal: Principal, label_id: str) -> asyncpg.Record:
    """The caller's label rule, its endpoint held for the change until the transaction ends (404, 410)."""
    return await require_owned(conn, principal, label_id, kind="lbl", noun="label rule", get=db_labels.lock)


async def list_labels(ctx: Context, principal: Principal, endpoint_id: str) -> LabelRuleList:
    async with ctx.pool.acquire() as conn:
        rows = await endpoint_rows(conn, principal, endpoint_id, db_labels.list_for_endpoint)
    return LabelRuleList(labels=[label_record(r) for r in rows])


async def get_label(ctx: Context, principal: Principal, label_id: str) -> LabelRule:
    async with ctx.pool.acquire() as conn:
        row = await require_owned(conn, principal, label_id, kind="lbl", noun="label rule", get=db_labels.get)
    return label_record(row)


async def create_label(ctx: Context, principal: Principal, endpoint_id: str, data: LabelRuleCreate) -> LabelRule:
    require_write(principal)
    path = check_path(data.source, data.path)
    output_key = _check_key(data.output_key)
    color = default_color(output_key) if data.color is None else _check_color(data.color)
    async with ctx.pool.acquire() as conn, conn.transaction():
        await require_endpoint(conn, principal, endpoint_id)
        if not await db_rules.lock_routing(conn, principal.account_id, endpoint_id):
            raise NotFoundError(f"endpoint {endpoint_id!r} not found")
        if await db_labels.count_for_endpoint(conn, endpoint_id) >= MAX_LABEL_RULES:
            raise ValidationError(
                f"endpoint {endpoint_id!r} already has {MAX_LABEL_RULES} label rules, the most it can have"
            )
        await _check_unique(conn, endpoint_id, output_key, None)
        row = await db_labels.insert(
            conn,
            label_id=ids.new_id("lbl"),
            endpoint_id=endpoint_id,
            source=data.source,
            path=path,
            output_key=output_key,
            color=color,
        )
    return label_record(row)


async def update_label(ctx: Context, principal: Principal, label_id: str, data: LabelRuleUpdate) -> LabelRule:
    """Changes the given fields. A new source or path is checked against the other (a header name is not
    a body path's rule, and the reverse)."""
    require_write(principal)
    changes: dict[str, Any] = {
        f: v for f in ("source", "path", "output_key", "color") if (v := getattr(data, f)) is not msgspec.UNSET
    }
    if "output_key" in changes:
        changes["output_key"] = _check_key(changes["output_key"])
    if "color" in changes:
        changes["color"] = _check_color(changes["color"])
    async with ctx.pool.acquire() as conn, conn.transaction():
        current = await _lock(conn, principal, label_id)
        if "source" in changes or "path" in changes:
            changes["path"] = check_path(changes.get("source", current["source"]), changes.get("path", current["path"]))
        if "output_key" in changes:
            await _check_unique(conn, current["endpoint_id"], changes["output_key"], label_id)
        row = await db_labels.update(conn, label_id, changes)
    if row is None:
        raise _not_found(label_id)
    return label_record(row)


async def delete_label(ctx: Context, principal: Principal, label_id: str) -> Deleted:
    require_write(principal)
    async with ctx.pool.acquire() as conn, conn.transaction():
        await _lock(conn, principal, label_id)
        if not await db_labels.delete(conn, label_id):
            raise _not_found(label_id)
    return Deleted(id=label_id)
