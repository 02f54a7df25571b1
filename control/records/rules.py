"""Routing rule records: a condition tree and the destinations a matching event is forwarded to."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from control.records.text import NO_NUL, DocumentedAs, Name

__all__ = (
    "MAX_RULE_DESTINATIONS",
    "ConditionExistsLeaf",
    "ConditionGroup",
    "ConditionLeaf",
    "ConditionNode",
    "ConditionRegexLeaf",
    "ConditionTree",
    "OptionalConditionTree",
    "Rule",
    "RuleCreate",
    "RuleList",
    "RuleName",
    "RuleUpdate",
)

MAX_RULE_DESTINATIONS = 100
"""As many as an endpoint may have (``control.service.destinations.crud.MAX_DESTINATIONS``)."""

RuleName = Name
DESTINATION_ID = r"^dst_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
DestinationId = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
DestinationIds = Annotated[
    list[DestinationId],
    msgspec.Meta(
        min_length=1,
        max_length=MAX_RULE_DESTINATIONS,
        description="Destinations of the same endpoint that a matching event is forwarded to, each once",
        # Another shape, or a repeat, is a 400 naming the item (the service checks ids against the endpoint).
        extra_json_schema={"uniqueItems": True, "items": {"type": "string", "pattern": DESTINATION_ID}},
    ),
]

# -- condition trees, as the OpenAPI document describes them --------------------------------------------
# The server decodes a tree as any JSON and checks it with control.routing.conditions.validate, whose messages
# name the offending node (`condition_tree.children[1].operator: unknown operator "gt"`, code
# invalid_condition_tree). These Structs only document that grammar (DocumentedAs); nothing decodes into them.

_META_KEYS = "provider|event_type|method|path|content_type|source_ip|signature_valid|ip_allowed|endpoint_id|environment"
FIELD_PATTERN = (
    rf"^(?:body(?:\.[^.\x00]+)*|header\.[!#$%&'*+.^_`|~0-9A-Za-z-]+|meta\.(?:{_META_KEYS}"
    r"|label\.[A-Za-z0-9_-]{1,64}))$"
)
"""A field in the condition-tree syntax, as the document states it (also a FIFO destination's ordering key)."""
FieldName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1000,
        pattern=FIELD_PATTERN,
        description="`body` or `body.<dot.path>` (a numeric segment indexes an array), `header.<name>` "
        "(any case), `meta.<key>` or `meta.label.<key>` (the event's label of that key)",
    ),
]
# float: any JSON number. The pattern applies to a string value (Litestar drops constraints inside a union).
LeafValue = Annotated[str | float | bool | None, msgspec.Meta(extra_json_schema={"pattern": NO_NUL})]


class ConditionGroup(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Matches when all (`AND`) or any (`OR`) of its children match; an empty AND matches every event, an
    empty OR none."""

    op: Literal["AND", "OR"]
    # Documented, not typed, as a union: msgspec cannot build a decoder for a union of untagged Structs.
    children: Annotated[list[Any], DocumentedAs(list[ConditionNode])]


class ConditionLeaf(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`equals` and `not_equals` compare text forms (`2000` equals `"2000"`); `contains` is a substring,
    array membership or object key test. On `meta.provider` the value is a provider by its catalog name or an
    alias, as the event list's `provider` filter takes it (`github` is stored as `code_host`); another name
    is refused."""

    field: FieldName
    operator: Literal["equals", "not_equals", "contains"]
    value: LeafValue


class ConditionRegexLeaf(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Searches the field's text form with an RE2 pattern (linear time: no backreferences or lookaround)."""

    field: FieldName
    operator: Literal["regex"]
    # Not the standard "regex" format (ECMA 262): RE2 syntax, which differs from it both ways.
    value: Annotated[str, msgspec.Meta(max_length=1000, pattern=NO_NUL, extra_json_schema={"format": "re2"})]


class ConditionExistsLeaf(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """True when the field is present, even when it is null."""

    field: FieldName
    operator: Literal["exists"]


ConditionNode = ConditionGroup | ConditionLeaf | ConditionRegexLeaf | ConditionExistsLeaf

_TREE = msgspec.Meta(
    description='A group `{"op": "AND"|"OR", "children": [...]}` or a leaf `{"field", "operator", "value"}`; '
    "`field` is `body.<dot.path>`, `header.<name>` or `meta.<key>`; `operator` one of `equals`, `not_equals`, "
    "`contains`, `exists`, `regex` (RE2); every operator but `exists` requires `value`. An empty AND group "
    "matches every event. At most 32 levels, 256 nodes and 64 KiB."
)
ConditionTree = Annotated[Any, _TREE, DocumentedAs(ConditionNode)]
OptionalConditionTree = Annotated[Any, _TREE, DocumentedAs(ConditionNode | None)]
"""Where ``null`` means no tree (a destination created without a rule)."""


Active = Annotated[bool, msgspec.Meta(description="false: the rule is kept but matches nothing until set true")]


class RuleCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: RuleName
    condition_tree: ConditionTree
    destination_ids: DestinationIds
    active: Active = True


class RuleUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays as it is; ``destination_ids`` replaces the whole list."""

    name: RuleName | msgspec.UnsetType = msgspec.UNSET
    active: Active | msgspec.UnsetType = msgspec.UNSET
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
