"""Destination records: the outbound URLs an endpoint's rules forward events to."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from control.records import Deleted
from control.records.rules import ConditionTree, Rule, RuleName

__all__ = (
    "Destination",
    "DestinationCreate",
    "DestinationCreated",
    "DestinationDeleted",
    "DestinationList",
    "DestinationUpdate",
)

Url = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=2048, description="Absolute http or https URL events are forwarded to"),
]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"\S")]
Headers = Annotated[
    dict[str, str],
    msgspec.Meta(
        description="Sent on every delivery on top of the event's own headers; names are stored lowercased. "
        "Hop-by-hop headers, `host`, `content-length` and `x-hookyard-*` cannot be set. `null` clears them."
    ),
]


class DestinationCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``forward_all`` or ``condition_tree`` also creates a rule forwarding to the new destination (in the same
    transaction); ``rule_name`` names that rule."""

    url: Url
    name: Name | None = None
    headers: Headers | None = None
    forward_all: bool = False
    condition_tree: ConditionTree | msgspec.UnsetType = msgspec.UNSET
    rule_name: RuleName | None = None


class DestinationUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """PATCH body: a field left out stays as it is; ``name: null`` and ``headers: null`` clear them."""

    url: Url | msgspec.UnsetType = msgspec.UNSET
    name: Name | msgspec.UnsetType | None = msgspec.UNSET
    headers: Headers | msgspec.UnsetType | None = msgspec.UNSET


class Destination(msgspec.Struct, kw_only=True):
    id: str
    endpoint_id: str
    name: str | None
    url: str
    headers: dict[str, str] | None
    created_at: datetime
    updated_at: datetime


class DestinationCreated(Destination, kw_only=True):
    """The destination, plus the rule created with it when the request had ``forward_all`` or
    ``condition_tree`` (absent otherwise)."""

    rule: Rule | msgspec.UnsetType = msgspec.UNSET


class DestinationList(msgspec.Struct, kw_only=True):
    destinations: list[Destination]


class DestinationDeleted(Deleted, kw_only=True):
    """Rules that forwarded only to this destination are deleted with it; their ids are listed here."""

    deleted_rule_ids: list[str] = msgspec.field(default_factory=list)
