"""Path and query parameters the controllers share, documented exactly as the service checks them.

What the document states is ``schema_extra`` (documentation only): the service layer does the checking, with
messages that name the parameter, so /v1 and the MCP tools refuse alike. An id of another shape is not a
400 but a 404, like an unknown id: the pattern tells a client what an id looks like, not that a request
with another one is malformed.
"""

from __future__ import annotations

from typing import Annotated

from litestar.params import PathParameter, QueryParameter

from control.api.openapi import json_schema
from control.records.text import NO_NUL, REF, id_pattern
from control.support.parameter_messages import not_boolean
from shared.errors import ValidationError

__all__ = (
    "CURSOR",
    "FILTER_INSTANT",
    "AlertDestinationId",
    "AllowlistEntryId",
    "Cursor",
    "DestinationId",
    "EndpointId",
    "EventId",
    "LabelId",
    "RuleId",
    "boolean",
    "instant_schema",
    "query",
    "ref_schema",
    "text_schema",
)


def _id(prefix: str, what: str) -> PathParameter:
    return PathParameter(
        description=f"The {what}'s id (`{prefix}_` and a ULID)", schema_extra={"pattern": id_pattern(prefix)}
    )


EndpointId = Annotated[str, _id("ep", "endpoint")]
EventId = Annotated[str, _id("evt", "event")]
DestinationId = Annotated[str, _id("dst", "destination")]
RuleId = Annotated[str, _id("rule", "rule")]
AllowlistEntryId = Annotated[str, _id("al", "allowlist entry")]
LabelId = Annotated[str, _id("lbl", "label rule")]
AlertDestinationId = Annotated[str, _id("adst", "alert destination")]

CURSOR = r"^[A-Za-z0-9_-]{1,200}$"
"""``control.support.page_cursors``: url-safe base64 without padding, at most 200 characters."""


def query(description: str, *, kind: str = "string", name: str | None = None, **schema: object) -> QueryParameter:
    """An optional query parameter documented as absent-or-``kind``: Litestar documents ``T | None = None``
    as ``oneOf: [T, null]``, but a query string has no null, and clients (schemathesis) send ``x=`` for it."""
    extra: dict[str, object] = {"oneOf": None, "type": kind, **schema}
    if name is None:
        return QueryParameter(description=description, schema_extra=extra)
    return QueryParameter(name=name, description=description, schema_extra=extra)


def boolean(value: str | None, name: str) -> bool | None:
    """A boolean query parameter (declared ``str | None`` with ``query(..., kind="boolean")``) read as OpenAPI
    serializes one: ``true`` or ``false``. Litestar's own reading of a ``bool`` would also take ``null`` (as
    absent), ``1`` or ``True``, which the document does not allow."""
    if value is None or value in ("true", "false"):
        return None if value is None else value == "true"
    raise ValidationError(not_boolean(name, value))


Cursor = Annotated[
    str | None,
    query("`next_cursor` of the previous page, unchanged (an opaque token of this list)", pattern=CURSOR),
]

FILTER_INSTANT = r"^(?:000[2-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-"
"""Years 0002 to 9998 (``control.service.events.read.FILTER_YEARS``): at the two ends of the calendar a UTC offset
can move an instant out of it."""


def instant_schema() -> dict[str, object]:
    """``since`` / ``until``: an RFC 3339 date-time or full-date (ISO 8601 forms Python reads are accepted
    too, a date-time without a zone as UTC), in years 0002 to 9998."""
    return {
        "anyOf": [json_schema({"format": "date-time"}), json_schema({"format": "date"})],
        "pattern": FILTER_INSTANT,
    }


def text_schema(max_length: int) -> dict[str, object]:
    """Free text of a filter: any characters but NUL, at most ``max_length``."""
    return {"maxLength": max_length, "pattern": NO_NUL}


def ref_schema() -> dict[str, object]:
    return {"minLength": 1, "maxLength": 200, "pattern": REF}
