"""Routing rule tools: which events go to which destinations (``rules``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records import Deleted
from control.records.rules import Rule, RuleCreate, RuleList, RuleUpdate
from control.service import rules as service


@tool("ListRules", read_only=True)
async def list_rules(call: Call, endpoint_id: str) -> RuleList:
    """List an endpoint's routing rules, oldest first."""
    return await service.list_rules(call.ctx, call.principal, endpoint_id)


@tool("CreateRule")
async def create_rule(call: Call, endpoint_id: str, data: RuleCreate) -> Rule:
    """Create a routing rule: events matching `condition_tree` are forwarded to `destination_ids`."""
    return await service.create_rule(call.ctx, call.principal, endpoint_id, data)


@tool("GetRule", read_only=True)
async def get_rule(call: Call, rule_id: str) -> Rule:
    """Read one routing rule: its condition tree, destinations and whether it is active."""
    return await service.get_rule(call.ctx, call.principal, rule_id)


@tool("UpdateRule", idempotent=True)
async def update_rule(call: Call, rule_id: str, data: RuleUpdate) -> Rule:
    """Change a rule's `name`, `active`, `condition_tree` or `destination_ids`; omitted fields stay."""
    return await service.update_rule(call.ctx, call.principal, rule_id, data)


@tool("DeleteRule", destructive=True, idempotent=True)
async def delete_rule(call: Call, rule_id: str) -> Deleted:
    """Delete a routing rule; its destinations stay."""
    return await service.delete_rule(call.ctx, call.principal, rule_id)
