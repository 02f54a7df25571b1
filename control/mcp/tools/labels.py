"""Label rule tools: which value of every new event becomes a searchable tag (``labels``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records import Deleted
from control.records.labels import LabelRule, LabelRuleCreate, LabelRuleList, LabelRuleUpdate
from control.service import labels as service


@tool("ListLabelRules", read_only=True)
async def list_label_rules(call: Call, endpoint_id: str) -> LabelRuleList:
    """List an endpoint's label rules, oldest first (the order labels appear on an event)."""
    return await service.list_labels(call.ctx, call.principal, endpoint_id)


@tool("CreateLabelRule")
async def create_label_rule(call: Call, endpoint_id: str, data: LabelRuleCreate) -> LabelRule:
    """Label every event an endpoint stores from now on with the value at `path` (body or header)."""
    return await service.create_label(call.ctx, call.principal, endpoint_id, data)


@tool("GetLabelRule", read_only=True)
async def get_label_rule(call: Call, label_id: str) -> LabelRule:
    """Read one label rule: where its value comes from, its key and color."""
    return await service.get_label(call.ctx, call.principal, label_id)


@tool("UpdateLabelRule", idempotent=True)
async def update_label_rule(call: Call, label_id: str, data: LabelRuleUpdate) -> LabelRule:
    """Change a label rule, for events stored from now on; omitted fields stay."""
    return await service.update_label(call.ctx, call.principal, label_id, data)


@tool("DeleteLabelRule", destructive=True, idempotent=True)
async def delete_label_rule(call: Call, label_id: str) -> Deleted:
    """Stop labelling new events; the labels of stored events stay."""
    return await service.delete_label(call.ctx, call.principal, label_id)
