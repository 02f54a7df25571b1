"""Learned schema records (docs/reference/schemas.md): a schema with its fields, its versions, a diff between two
versions, correlation-key candidates, and generated code (for MCP; /v1 answers the text itself)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

__all__ = (
    "ChangeKind",
    "CorrelationCandidate",
    "CorrelationLink",
    "Correlations",
    "FieldType",
    "GeneratedTypes",
    "Schema",
    "SchemaChange",
    "SchemaDiff",
    "SchemaDiffRange",
    "SchemaField",
    "SchemaList",
    "SchemaVersion",
    "SchemaVersionList",
    "VersionArgument",
)

FieldType = Literal["string", "integer", "number", "boolean", "null", "object", "array"]
ChangeKind = Literal["added", "removed", "type_changed", "became_nullable", "became_required"]


class SchemaField(msgspec.Struct, kw_only=True):
    path: str
    """Dot path into the body (`data.object.amount`); an array's items are `items[]`."""
    types: list[FieldType]
    optional: bool
    """Missing from some samples that had its parent object."""
    nullable: bool
    presence: float
    """Share of the schema's samples that had it, 0 to 1."""


class Schema(msgspec.Struct, kw_only=True):
    id: str
    provider: str | None
    event_type: str | None
    endpoint_id: str | None
    """Set only for unattributed traffic (one schema per endpoint)."""
    current_version: int
    version: int
    """The version `fields` describe (the current one unless `version` was asked for)."""
    version_count: int
    sample_count: int
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    fields: list[SchemaField]


class SchemaList(msgspec.Struct, kw_only=True):
    schemas: list[Schema]


class SchemaVersion(msgspec.Struct, kw_only=True):
    version: int
    created_at: datetime
    sample_count: int
    """Samples learned while this version was the current one."""
    fields: list[SchemaField]


class SchemaVersionList(msgspec.Struct, kw_only=True):
    versions: list[SchemaVersion]
    """Newest first."""


class SchemaChange(msgspec.Struct, kw_only=True):
    path: str
    change: ChangeKind
    breaking: bool
    """From the consumer's side: `removed`, `type_changed` and `became_nullable` are."""
    before: SchemaField | None
    after: SchemaField | None


class SchemaDiff(msgspec.Struct, kw_only=True):
    from_: int = msgspec.field(name="from")
    """0 is the empty schema before version 1."""
    to: int
    changes: list[SchemaChange]


VersionArgument = Annotated[int, msgspec.Meta(ge=1, le=999_999_999)] | str | None
"""A schema version as a tool argument: the integer it is (``1``, as ``Schema.version`` shows it), or the text
/v1 reads from a URL (``"1"``, ``"current"``); ``control.service.schemas`` checks either."""


class SchemaDiffRange(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The versions a diff compares, as the MCP tool takes them (``from`` is not a Python name)."""

    from_: VersionArgument = msgspec.field(default=None, name="from")
    to: VersionArgument = None


class CorrelationLink(msgspec.Struct, kw_only=True):
    schema_id: str
    provider: str | None
    event_type: str | None
    path: str
    shared_values: int
    """Values (of the sampled ones) both fields carried."""


class CorrelationCandidate(msgspec.Struct, kw_only=True):
    """An id-like field that carried at least two distinct values; ``score`` is ``presence × cardinality ×
    type_stability × (0.5 + 0.5 × min(1, linked_event_types / 2))`` (docs/reference/schemas.md)."""

    path: str
    score: float
    presence: float
    """Share of the schema's samples that carried it."""
    distinct: int
    """Distinct values (estimated past 256; ``""`` and ``0`` are not counted)."""
    distinct_ratio: float
    cardinality: float
    """``log distinct / log min(occurrences, 1000)``: 1 for a value per occurrence."""
    type_stability: float
    """1 for one type, halved for several, 0.8 when it can be null."""
    linked_event_types: int
    """The account's other schemas with a field that carried some of its values."""
    links: list[CorrelationLink]
    """Id-like fields of the account's schemas (this one's included) that carried the same values."""


class Correlations(msgspec.Struct, kw_only=True):
    schema_id: str
    version: int
    candidates: list[CorrelationCandidate]
    """Best first."""


class GeneratedTypes(msgspec.Struct, kw_only=True):
    schema_id: str
    version: int
    lang: str
    framework: str | None
    content_type: str
    text: str
