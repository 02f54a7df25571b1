"""Routing rule records: a condition tree and the destinations a matching event is forwarded to."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

__all__ = (
    "MAX_RULE_DESTINATIONS",
    "ConditionTree",
    "Rule",
    "RuleCreate",
    "RuleList",
    "RuleName",
    "RuleUpdate",
)

MAX_RULE_DESTINATIONS = 100
"""As many as an endpoint may have (``control.service.destinations.MAX_DESTINATIONS``)."""

RuleName = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"\S")]
DestinationId = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
DestinationIds = Annotated[
    list[DestinationId],
    msgspec.Meta(
        min_length=1,
        max_length=MAX_RULE_DESTINATIONS,
        description="Destinations of the same endpoint that a matching event is forwarded to, each once",
    ),
]
# Any JSON on the way in: the tree is checked by control.routing.conditions.validate, whose messages name
# the offending node (`condition_tree.children[1].operator: unknown operator "gt"`), code invalid_condition_tree.
ConditionTree = Annotated[
    Any,
    msgspec.Meta(
        description='A group `{"op": "AND"|"OR", "children": [...]}` or a leaf `{"field", "operator", "value"}`; '
        "`field` is `body.<dot.path>`, `header.<name>` or `meta.<key>`; `operator` one of `equals`, `not_equals`, "
        "`contains`, `exists`, `regex` (RE2); every operator but `exists` requires `value`. An empty AND group "
        "matches every event. At most 32 levels, 256 nodes and 64 KiB."
    ),
]


class RuleCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: RuleName
    condition_tree: ConditionTree
    destination_ids: DestinationIds
    active: bool = True


class RuleUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays as it is; ``destination_ids`` replaces the whole list."""

    name: RuleName | msgspec.UnsetType = msgspec.UNSET
    active: bool | msgspec.UnsetType = msgspec.UNSET
    condition_tree: ConditionTree | msgspec.UnsetType = msgspec.UNSET
    destination_ids: DestinationIds | msgspec.UnsetType = msgspec.UNSET


class Rule(msgspec.Struct, kw_only=True):
    id: str
    endpoint_id: str
    name: str
    condition_tree: dict[str, Any]
    destination_ids: list[str]
    active: bool
    created_at: datetime
    updated_at: datetime


class RuleList(msgspec.Struct, kw_only=True):
    rules: list[Rule]
