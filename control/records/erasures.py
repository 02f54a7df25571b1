"""Erasure records: a request to remove every event of an endpoint whose field has a value, and the job that
does it, which is also the audit answer (what was erased, when, and a hash of the value, never the value
once it is done)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from control.records.fields import FIELD_PATTERN
from control.records.text import NO_NUL

__all__ = ("MAX_VALUE_LENGTH", "EraseRequest", "Erasure", "ErasureList", "ErasureState", "ErasureValue")

MAX_VALUE_LENGTH = 1000
"""Characters of a text value: an id, an email address, a name; far more than any of them."""

ErasureState = Literal["pending", "running", "completed", "failed"]
ErasureValue = Annotated[str, msgspec.Meta(max_length=MAX_VALUE_LENGTH)] | bool | int | float


class EraseRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    field: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=1000,
            description="A field in the condition-tree syntax: `body.<dot.path>` (`body.data.object.customer`), "
            "`header.<name>`, `meta.label.<key>` or `meta.<key>`",
            extra_json_schema={"pattern": FIELD_PATTERN},
        ),
    ]
    value: Annotated[
        ErasureValue,
        msgspec.Meta(
            description="A string, number or boolean; an event matches when its field equals it as a condition's "
            '`equals` does (`2000` equals `"2000"`). An integer has at most 1,000 digits (matched exactly at any '
            "size), a number is finite; anything else is a 400 naming `value`",
            # As decoded: a JSON number is one branch (an integer is a number), so exactly one matches.
            extra_json_schema={
                "oneOf": [
                    {"type": "string", "minLength": 1, "maxLength": MAX_VALUE_LENGTH, "pattern": NO_NUL},
                    {"type": "boolean"},
                    {"type": "number"},
                ]
            },
        ),
    ]


class Erasure(msgspec.Struct, kw_only=True):
    """An erasure job and, once done, its audit record."""

    id: str
    endpoint_id: str
    field: str
    value: Annotated[
        str | bool | int | float | None,
        # As decoded, an integer is a number: one branch for both, so exactly one `oneOf` branch matches.
        msgspec.Meta(extra_json_schema={"oneOf": [{"type": t} for t in ("string", "boolean", "number", "null")]}),
    ]
    """The value while the job runs; null once it is done or failed (``value_sha256`` stays)."""
    value_sha256: str
    """Hex SHA-256 of ``<id>:<the value as JSON>`` (``erase_…:"cus_123"``): whoever holds the value can check
    that this job erased it; the record itself keeps no personal data."""
    state: ErasureState
    """``pending`` (waiting for the flush to store what the edge acknowledged before the request), ``running``,
    ``completed`` (the word a bulk retry job ends with too), or ``failed`` (a step failed for the stored data
    five times in a row; ``error`` says why, and what was erased until then stays counted). An outage of
    Postgres or Redis is waited out, never failed."""
    matched: int
    """Events of the endpoint found with the value (exact)."""
    erased: int
    """Of those, the events removed (with their deliveries and delivery tasks)."""
    deliveries_erased: int
    """Delivery records (attempts, with their request and response bodies) removed with the events."""
    dead_letters_erased: int
    """Records of the endpoint that the flush could not store, kept as dead letters, removed: matched as the
    events are, their labels those the endpoint's label rules give them now (an entry that cannot be decoded
    at all names no endpoint and is not looked at)."""
    schemas_scrubbed: int
    """Learned schemas of the endpoint whose correlation sketches held the value, and hold it no more."""
    scanned: int
    """Events of the endpoint looked at so far."""
    error: str | None
    """Why the last step failed for the stored data: while ``running`` it is being retried, once ``failed`` it
    is why the job stopped (the stage, and the event or schema at fault)."""
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ErasureList(msgspec.Struct, kw_only=True):
    erasures: list[Erasure]
    next_cursor: str | None = None
