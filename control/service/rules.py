"""Routing rules: a validated condition tree and the destinations (of the same endpoint) it forwards to.

Nothing is announced after a change: committing it bumps the endpoint's ``config_version`` (a trigger,
migration 0005), which every flush batch checks, so an event acknowledged after the 2xx is routed under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec

from control.db import destinations as db_destinations
from control.db import rules as db_rules
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records import Deleted
from control.records.rules import Rule, RuleCreate, RuleList, RuleUpdate
from control.routing import conditions
from control.service.endpoints import endpoint_rows, lock_owned, require_endpoint, require_owned, require_write
from control.support.text_checks import check_name
from shared import ids
from shared.errors import NotFoundError, ValidationError

__all__ = (
    "MAX_RULES",
    "check_destination_ids",
    "check_regex_budget",
    "check_rule_count",
    "check_unique",
    "create_rule",
    "delete_rule",
    "get_rule",
    "list_rules",
    "rule_record",
    "update_rule",
)

MAX_RULES = 100
"""Per endpoint. The flush worker evaluates every active rule of an endpoint on each of its events."""


def rule_record(row: asyncpg.Record) -> Rule:
    return Rule(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        name=row["name"],
        condition_tree=row["condition_tree"],
        destination_ids=list(row["destination_ids"]),
        active=row["active"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _not_found(rule_id: str) -> NotFoundError:
    return NotFoundError(f"rule {rule_id!r} not found")


def check_unique(destination_ids: Sequence[str]) -> None:
    seen: dict[str, int] = {}
    for i, destination_id in enumerate(destination_ids):
        if destination_id in seen:
            raise ValidationError(
                f"destination_ids[{i}]: {destination_id!r} is already listed at destination_ids[{seen[destination_id]}]"
            )
        seen[destination_id] = i


async def check_destination_ids(conn: Connection, endpoint_id: str, destination_ids: Sequence[str]) -> None:
    """Each id must be a destination of this endpoint. Another account's destination reads exactly like an
    unknown one; the check is a 400 (a body error), the path's resource exists."""
    shaped = [d for d in destination_ids if ids.is_id(d, "dst")]
    known = await db_destinations.existing_ids(conn, endpoint_id, shaped) if shaped else set()
    for i, destination_id in enumerate(destination_ids):
        if destination_id not in known:
            raise ValidationError(
                f"destination_ids[{i}]: no destination {destination_id!r} on endpoint {endpoint_id!r}"
            )


async def check_rule_count(conn: Connection, endpoint_id: str) -> None:
    if await db_rules.count_for_endpoint(conn, endpoint_id) >= MAX_RULES:
        raise ValidationError(f"endpoint {endpoint_id!r} already has {MAX_RULES} rules, the most it can have")


async def check_regex_budget(
    conn: Connection,
    endpoint_id: str,
    tree: dict[str, Any],
    *,
    replacing: str | None = None,
    field: str = "condition_tree",
) -> None:
    """Refuses a tree whose patterns, with those of the endpoint's other rules (active or not: activating one
    is no write of its tree), pass ``MAX_ENDPOINT_REGEX_PROGRAM``: the flush runs them all on each event, in the
    loop every account's events share (ADR 0094). Under the endpoint's routing lock, so two writes cannot both
    pass it."""
    own = conditions.regex_program(tree)
    if not own:
        return
    total = own + sum(
        conditions.regex_program(t) for t in await db_rules.trees_for_endpoint(conn, endpoint_id, excluding=replacing)
    )
    if total > conditions.MAX_ENDPOINT_REGEX_PROGRAM:
        raise conditions.InvalidConditionTree(
            f"{field}: with the patterns of the endpoint's other rules, {total} RE2 instructions, more than the "
            f"{conditions.MAX_ENDPOINT_REGEX_PROGRAM} an endpoint's rules may run over each event"
        )


async def list_rules(ctx: Context, principal: Principal, endpoint_id: str) -> RuleList:
    async with ctx.pool.acquire() as conn:
        rows = await endpoint_rows(conn, principal, endpoint_id, db_rules.list_for_endpoint)
    return RuleList(rules=[rule_record(r) for r in rows])


async def get_rule(ctx: Context, principal: Principal, rule_id: str) -> Rule:
    async with ctx.pool.acquire() as conn:
        row = await require_owned(conn, principal, rule_id, kind="rule", noun="rule", get=db_rules.get)
    return rule_record(row)


async def create_rule(ctx: Context, principal: Principal, endpoint_id: str, data: RuleCreate) -> Rule:
    require_write(principal)
    check_name(data.name, "name")
    tree = conditions.validate(data.condition_tree)
    check_unique(data.destination_ids)
    if not ids.is_id(endpoint_id, "ep"):
        raise NotFoundError(f"endpoint {endpoint_id!r} not found")
    async with ctx.pool.acquire() as conn, conn.transaction():
        await require_endpoint(conn, principal, endpoint_id)
        if not await db_rules.lock_routing(conn, principal.account_id, endpoint_id):
            raise NotFoundError(f"endpoint {endpoint_id!r} not found")
        await check_destination_ids(conn, endpoint_id, data.destination_ids)
        await check_rule_count(conn, endpoint_id)
        await check_regex_budget(conn, endpoint_id, tree)
        row = await db_rules.insert(
            conn,
            rule_id=ids.new_id("rule"),
            endpoint_id=endpoint_id,
            name=data.name,
            condition_tree=tree,
            active=data.active,
            destination_ids=data.destination_ids,
        )
    return rule_record(row)


async def update_rule(ctx: Context, principal: Principal, rule_id: str, data: RuleUpdate) -> Rule:
    """Changes the given fields; ``destination_ids`` replaces the list. Validated like a create."""
    require_write(principal)
    changes: dict[str, Any] = {
        f: v for f in ("name", "active", "condition_tree") if (v := getattr(data, f)) is not msgspec.UNSET
    }
    check_name(changes.get("name"), "name")
    if "condition_tree" in changes:
        changes["condition_tree"] = conditions.validate(changes["condition_tree"])
    destination_ids = data.destination_ids
    if destination_ids is not msgspec.UNSET:
        check_unique(destination_ids)
    async with ctx.pool.acquire() as conn, conn.transaction():
        endpoint_id = await lock_owned(conn, principal, rule_id, kind="rule", noun="rule", lock=db_rules.lock)
        if "condition_tree" in changes:
            await check_regex_budget(conn, endpoint_id, changes["condition_tree"], replacing=rule_id)
        if destination_ids is not msgspec.UNSET:
            await check_destination_ids(conn, endpoint_id, destination_ids)
            await db_rules.set_destinations(conn, rule_id, destination_ids)
        row = await db_rules.update(
            conn, principal.account_id, rule_id, changes, touch=destination_ids is not msgspec.UNSET
        )
        if row is None:
            raise _not_found(rule_id)
    return rule_record(row)


async def delete_rule(ctx: Context, principal: Principal, rule_id: str) -> Deleted:
    require_write(principal)
    async with ctx.pool.acquire() as conn, conn.transaction():
        # Under the endpoint's routing lock, so a concurrent PATCH of the rule never links a deleted rule.
        await lock_owned(conn, principal, rule_id, kind="rule", noun="rule", lock=db_rules.lock)
        if await db_rules.delete(conn, principal.account_id, rule_id) is None:
            raise _not_found(rule_id)
    return Deleted(id=rule_id)
