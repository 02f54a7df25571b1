"""Label rule records: a value taken from every new event of an endpoint (a body path or a header) and kept
with the event as a searchable, coloured tag ``{key, value, color}``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from control.records.text import NO_NUL, meaning

__all__ = (
    "COLOR",
    "MAX_LABEL_VALUE",
    "OUTPUT_KEY",
    "LabelRule",
    "LabelRuleCreate",
    "LabelRuleList",
    "LabelRuleUpdate",
    "LabelSource",
)

LabelSource = Annotated[
    Literal["body", "header"],
    msgspec.Meta(
        description="Where `path` looks: `body` (a JSON path into the body) or `header` (a header's name, "
        "case-insensitive)"
    ),
]
OUTPUT_KEY = meaning(r"^[A-Za-z0-9_-]{1,64}$", "must be 1 to 64 letters, digits, _ or -")
"""Letters, digits, ``_`` and ``-``: a key a condition tree can name as ``meta.label.<key>`` unambiguously."""
COLOR = meaning(r"^#[0-9A-Fa-f]{6}$", "must be a colour as # and six hex digits (#1f6feb)")
MAX_LABEL_VALUE = 200
"""Characters of a label's value; a longer value is cut there (a tag, not a copy of the payload)."""

LabelPath = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1000,
        description="source `body`: a dot path into the JSON body (`data.object.customer`; a numeric segment "
        "indexes an array: `items.0.sku`); source `header`: the header's name, any case",
        extra_json_schema={"pattern": NO_NUL},
    ),
]
OutputKey = Annotated[
    str,
    msgspec.Meta(
        pattern=OUTPUT_KEY,
        description="The label's key, unique per endpoint; conditions read it as `meta.label.<key>`",
    ),
]
Color = Annotated[str, msgspec.Meta(pattern=COLOR, description="`#rrggbb`; stored lowercase")]


class LabelRuleCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    source: LabelSource = "body"
    path: LabelPath
    output_key: OutputKey
    color: Color | None = None
    """Absent or null: a colour of the default palette, the same for the same key everywhere."""


class LabelRuleUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Changes only the fields given; a new ``path`` or ``source`` is validated against the other."""

    source: LabelSource | msgspec.UnsetType = msgspec.UNSET
    path: LabelPath | msgspec.UnsetType = msgspec.UNSET
    output_key: OutputKey | msgspec.UnsetType = msgspec.UNSET
    color: Color | msgspec.UnsetType = msgspec.UNSET


class LabelRule(msgspec.Struct, kw_only=True):
    id: str
    endpoint_id: str
    source: LabelSource
    path: str
    output_key: str
    color: str
    created_at: datetime


class LabelRuleList(msgspec.Struct, kw_only=True):
    labels: list[LabelRule]
