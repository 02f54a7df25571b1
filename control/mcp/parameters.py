"""A tool's arguments that are /v1 path or query parameters, checked against their documented schema first,
so a bad one reads as /v1's answer to the same bad parameter.

/v1 reads those parameters from the URL's text and refuses them in its own words (``control.api.params``,
``control.api.errors``); a tool's arguments would otherwise meet msgspec's (``success: Expected `bool |
null`, got `str```) or a service's backstop (``limit: must be between 1 and 100``). Checked here for every
tool alike, from the parameter's schema in the OpenAPI document (the declaration /v1 validates with), and
worded by the functions /v1 words them with (``control.support.parameter_messages``).

JSON stays typed: a boolean is a JSON ``true``/``false``, not the string ``"true"`` that a query string has
to use (a tool's input schema says ``boolean``, and a client that validates against it sends one); an
integer is a JSON number without a fraction (``20.0`` is one, as JSON Schema and the body decoder say). A
null for an optional parameter is "not given" (``given``), for a required one refused here. What the
schema states beyond type and integer range (patterns, enums, NUL, lone surrogates) is checked where /v1
checks it, in the service layer or the shared decoder, so it is worded once already.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from control.support.parameter_messages import not_boolean, out_of_range, wrong_type
from shared.errors import ValidationError

__all__ = ("check_parameters", "given")

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "number": (int, float), "integer": (int, float)}


def _json(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _integral(value: Any) -> bool:
    return not isinstance(value, bool) and (isinstance(value, int) or (isinstance(value, float) and value.is_integer()))


def _problem(name: str, schema: Mapping[str, Any], value: Any) -> str | None:
    kind = schema.get("type")
    if value is None:  # only a required one is left here (``given``): it has no default to take
        return wrong_type(name, kind, value) if isinstance(kind, str) else f"{name}: is required"
    if kind == "integer" and "minimum" in schema and "maximum" in schema:
        low, high = int(schema["minimum"]), int(schema["maximum"])
        if not _integral(value) or not low <= value <= high:
            shown = _json(value) if isinstance(value, str) else value  # "20" is a string, not the number 20
            return out_of_range(name, low, high, schema.get("description"), shown)
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else not_boolean(name, value)
    if not isinstance(kind, str) or kind not in _TYPES:
        return None  # a schema of no single type: the decoder and the service check it
    if (kind == "integer" and not _integral(value)) or isinstance(value, bool) or not isinstance(value, _TYPES[kind]):
        return wrong_type(name, kind, value)
    return None


def given(parameters: Mapping[str, Any], arguments: Mapping[str, Any], required: Collection[str]) -> dict[str, Any]:
    """``arguments`` without the optional parameters given as null: a URL has no null, so /v1's parameter is
    either there or not, and null for one is "not given" (its default), for ``limit`` as for ``success``."""
    return {k: v for k, v in arguments.items() if v is not None or k not in parameters or k in required}


def check_parameters(parameters: Mapping[str, Mapping[str, Any]], arguments: Mapping[str, Any]) -> None:
    """``ValidationError`` naming each argument that is a /v1 parameter of the wrong type or out of range (or
    a required one given as null), after ``given``."""
    problems = [
        problem
        for name, schema in parameters.items()
        if name in arguments and (problem := _problem(name, schema, arguments[name])) is not None
    ]
    if problems:
        raise ValidationError("; ".join(problems))
