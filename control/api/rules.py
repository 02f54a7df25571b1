"""/v1/endpoints/{id}/rules and /v1/rules/{id}: which events are forwarded to which destinations."""

from __future__ import annotations

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import EndpointId, RuleId
from control.db.context import Context, Principal
from control.records import Deleted
from control.records.rules import Rule, RuleCreate, RuleList, RuleUpdate
from control.service import rules as service

__all__ = ("EndpointRuleController", "RuleController")


class EndpointRuleController(Controller):
    path = "/endpoints/{endpoint_id:str}/rules"
    tags = ("rules",)

    @get("/", operation_id="ListRules", responses=errors(401, 404, 410, 429))
    async def list_rules(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> RuleList:
        """The endpoint's rules, oldest first. Every active rule whose tree matches an event forwards it."""
        return await service.list_rules(ctx, principal, endpoint_id)

    @post("/", operation_id="CreateRule", responses=errors(400, 401, 403, 404, 410, 429))
    async def create_rule(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[RuleCreate],
    ) -> Rule:
        """Creates a rule. `condition_tree` is validated first: a malformed tree is a 400
        `invalid_condition_tree` naming the offending node and nothing is stored. `destination_ids` lists
        destinations of this endpoint, each once."""
        return await service.create_rule(ctx, principal, endpoint_id, data)


class RuleController(Controller):
    path = "/rules"
    tags = ("rules",)

    @get("/{rule_id:str}", operation_id="GetRule", responses=errors(401, 404, 410, 429))
    async def get_rule(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], rule_id: RuleId
    ) -> Rule:
        return await service.get_rule(ctx, principal, rule_id)

    @patch("/{rule_id:str}", operation_id="UpdateRule", responses=errors(400, 401, 403, 404, 410, 429))
    async def update_rule(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        rule_id: RuleId,
        data: JSONBody[RuleUpdate],
    ) -> Rule:
        """Changes `name`, `active`, `condition_tree` or `destination_ids` (which replaces the list); fields
        left out stay. Validated like a create; nothing changes when anything is refused."""
        return await service.update_rule(ctx, principal, rule_id, data)

    @delete("/{rule_id:str}", operation_id="DeleteRule", status_code=200, responses=errors(401, 403, 404, 410, 429))
    async def delete_rule(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], rule_id: RuleId
    ) -> Deleted:
        """Deletes the rule; its destinations stay."""
        return await service.delete_rule(ctx, principal, rule_id)
