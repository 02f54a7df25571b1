"""msgspec's refusal of a request body's field, said in our words: the words a refused query parameter gets
(``control.support.parameter_messages``) where one has them, the value given echoed as those echo it.

msgspec words a problem for a Python programmer (``Expected `str | null`, got `int```, ``Expected `int` >=
1``): a type name in backticks, one bound of two, no value. Its message carries the problem and where it is
(`` - at `$.a.b[0]` ``); the value is found at that path in the body's JSON, and the field's declared type
(``msgspec.inspect``) gives what the message leaves out: both bounds of a range, an enum's members. What is
echoed (ADR 0082): a value JSON-shown and bounded as ``parameter_messages`` shows one; for a value of the
wrong length only its length (a too-short secret is still a secret); nothing for a pattern, whose rule says
what is wrong; for a secret (a ``writeOnly`` field, ADR 0086) only its kind and length, whatever is wrong.
A form not listed here keeps msgspec's words rather than a wrong translation.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from msgspec import inspect as mi

from control.support.parameter_messages import (
    choices_words,
    kind_words,
    not_boolean,
    out_of_range,
    shown,
    wrong_length,
)

__all__ = ("MISSING", "TOO_LARGE", "locate", "node_at", "secret_at", "translate", "unhide_key")

MISSING: Any = object()
"""No value found at a message's path (a body that is not JSON past the error, a dict key msgspec hides)."""

TOO_LARGE = "Number too large to represent"
"""msgspec's ``Number out of range`` (``1e999``, larger than any float), worded as a problem of its own."""

_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_TYPES |= {kind: kind for kind in ("null", "object", "array")}
_FORMATS = {
    "datetime": "an RFC 3339 date-time",
    "date": "an RFC 3339 date (YYYY-MM-DD)",
    "time": "an RFC 3339 time",
    "uuid": "a UUID",
    "bytes": "a base64-encoded string",
    "decimal": "a decimal number",
    "timedelta": "an ISO 8601 duration",
}
_INVALID = {
    "Invalid RFC3339 encoded datetime": "datetime",
    "Invalid RFC3339 encoded date": "date",
    "Invalid RFC3339 encoded time": "time",
    "Invalid UUID": "uuid",
    "Invalid base64 encoded string": "bytes",
    "Invalid decimal string": "decimal",
    "Invalid ISO8601 duration": "timedelta",
}
_WORDS = {">=": "at least", "<=": "at most", ">": "greater than", "<": "less than"}
_FLOAT_BOUNDS = ((">", "gt"), (">=", "ge"), ("<", "lt"), ("<=", "le"))
_ARRAYS = (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)


def _segments(where: str) -> list[tuple[str, str]]:
    return _SEGMENT.findall(where if where.startswith("[") else f".{where}")


def locate(value: Any, where: str) -> Any:
    """The value at ``where`` (``a.b[0]``, as msgspec writes a path) in the body's JSON, or ``MISSING``."""
    found = value
    for name, index in _segments(where) if where else []:
        if index == "...":
            return MISSING
        if index:
            found = found[int(index)] if isinstance(found, list) and int(index) < len(found) else MISSING
        else:
            found = found.get(name, MISSING) if isinstance(found, dict) else MISSING
    return found


def node_at(root: type, where: str, value: Any) -> mi.Type | None:
    """The declared type at ``where`` in the record ``root`` (a union of tagged records resolved by the tag
    given in ``value``), or None where it cannot be told."""
    declared: mi.Type | None = _bare(_declared(root, where, value))
    return declared


def secret_at(root: type, where: str, value: Any) -> bool:
    """Whether the field at ``where`` is a secret (``writeOnly`` in its schema, ``control.records.text.SECRET_FIELD``),
    or a record (or a union of records) that holds one: its value is never echoed, in any form, only its kind
    and length. A destination's ``auth`` given as the string ``"Bearer tok_..."`` is the secret given in the
    wrong shape, and was echoed whole (``must be an object or null, got "Bearer tok_..."``)."""
    return _marked(_declared(root, where, value), set())


def _marked(node: Any, seen: set[type]) -> bool:
    """``node`` is a secret, or a record holding one at any depth (``seen``: records already looked into)."""
    if isinstance(node, mi.Metadata):
        return bool((node.extra_json_schema or {}).get("writeOnly")) or _marked(node.type, seen)
    if isinstance(node, mi.UnionType):
        return any(_marked(t, seen) for t in node.types)
    if isinstance(node, mi.StructType) and node.cls not in seen:
        seen.add(node.cls)
        return any(_marked(f.type, seen) for f in node.fields)
    if isinstance(node, _ARRAYS):
        return _marked(node.item_type, seen)
    return isinstance(node, mi.DictType) and _marked(node.value_type, seen)


def _declared(root: type, where: str, value: Any) -> Any:
    """The type at ``where`` as declared, its ``Metadata`` kept (``node_at`` takes it off)."""
    node: mi.Type | None = mi.type_info(root)
    found = value
    for name, index in _segments(where) if where else []:
        node = _member(node, found, bool(index))
        if index == "...":  # a dict's value, its key not named
            node, found = (node.value_type if isinstance(node, mi.DictType) else None), MISSING
        elif index:
            node = node.item_type if isinstance(node, _ARRAYS) else None
            found = (
                found[int(index)]
                if isinstance(found, list) and index.isdigit() and int(index) < len(found)
                else MISSING
            )
        elif isinstance(node, mi.DictType):
            node, found = node.value_type, MISSING
        elif (tagged := _tags(node)) and name == tagged[0].tag_field:  # a tag of none of the records
            return mi.LiteralType(values=tuple(t.tag for t in tagged))
        elif isinstance(node, mi.StructType):
            node = next((f.type for f in node.fields if f.encode_name == name), None)
            found = found.get(name, MISSING) if isinstance(found, dict) else MISSING
        else:
            return None
    return node


def _bare(node: Any) -> Any:
    """``node`` without its ``Metadata`` wrapping (a description, a schema's extra words)."""
    while isinstance(node, mi.Metadata):
        node = node.type
    return node


def _flat(node: Any) -> list[Any]:
    """The members of ``node``: itself, or every type of a union (one inside another's ``Metadata`` too)."""
    node = _bare(node)
    return [member for t in node.types for member in _flat(t)] if isinstance(node, mi.UnionType) else [node]


def _tags(node: Any) -> list[mi.StructType]:
    return [t for t in _flat(node) if isinstance(t, mi.StructType) and t.tag_field]


def _member(node: Any, found: Any, indexed: bool) -> Any:
    """The member of a union that a path continues into: an array for ``[0]``, a record or dict for ``.a``;
    of several tagged records, the one whose tag ``found`` gives (else the union, which names its tag)."""
    kinds = (*_ARRAYS, mi.DictType) if indexed else (mi.StructType, mi.DictType)
    members = [t for t in _flat(node) if isinstance(t, kinds)]
    if len(members) == 1:
        return members[0]
    tagged = _tags(node)
    if tagged and isinstance(found, dict) and tagged[0].tag_field in found:
        return next((t for t in tagged if t.tag == found[tagged[0].tag_field]), node)
    return node if tagged else None


def _of(node: Any, kind: type[mi.Type]) -> Any:
    """The ``kind`` member of ``node`` (itself, or in a union: ``str | null`` holds the string's bounds)."""
    return next((t for t in _flat(node) if isinstance(t, kind)), None)


def _number(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else str(n)


def _float_bounds(declared: mi.FloatType | None) -> str:
    """``from 0.001 to 10000`` for a number with both bounds inclusive, as an integer's range reads; else each
    bound (``greater than 0 and at most 100``); empty without any."""
    if declared is None:
        return ""
    if declared.ge is not None and declared.le is not None:
        return f"from {_number(declared.ge)} to {_number(declared.le)}"
    bounds = [(op, getattr(declared, name)) for op, name in _FLOAT_BOUNDS if getattr(declared, name) is not None]
    return " and ".join(f"{_WORDS[op]} {_number(n)}" for op, n in bounds)


class _Withheld:
    """A secret's value as a message may show it: its kind, and a string's or an array's length."""

    __slots__ = ("size", "words")

    def __init__(self, given: Any) -> None:
        self.size = len(given) if isinstance(given, (str, list, dict)) else None
        if isinstance(given, str):
            self.words = f"a string of {len(given)} character{'' if len(given) == 1 else 's'}"
        elif isinstance(given, list):
            self.words = f"an array of {len(given)} item{'' if len(given) == 1 else 's'}"
        elif isinstance(given, dict):
            self.words = "an object"
        elif isinstance(given, bool):
            self.words = "a boolean"
        else:
            self.words = "null" if given is None else "a number"


def _got(given: Any) -> str:
    return (
        "" if given is MISSING else f", got {given.words}" if isinstance(given, _Withheld) else f", got {shown(given)}"
    )


def _range(field: str, node: Any, given: Any) -> str | None:
    """An integer declared with both bounds: the whole range, as ``out_of_range`` says a parameter's."""
    if node is None:
        return None
    low = node.ge if node.ge is not None else None if node.gt is None else node.gt + 1
    high = node.le if node.le is not None else None if node.lt is None else node.lt - 1
    if low is None or high is None:
        return None
    # shown as JSON shows it ("20" is not the number 20), as a tool's argument is: out_of_range shows text as is
    text = (
        None
        if given is MISSING
        else given.words
        if isinstance(given, _Withheld)
        else shown(given)
        if isinstance(given, str) or given is None
        else given
    )
    return out_of_range(field, low, high, None, text)


_SHORT_SECRET = (
    " (a shorter secret is too easy to guess: if the provider issued this one, or let you set it, rotate it "
    "there to one of at least {low} characters and give that here)"
)
"""A secret too short (a provider's signing secret, ``resign_with``): what to do, since its owner cannot
lengthen it here; a webhook secret set by hand at GitHub can be any length."""


def _size(given: Any) -> int | None:
    if isinstance(given, _Withheld):
        return given.size
    return len(given) if isinstance(given, (str, list, dict)) else None


_DECLARED: dict[str, type[mi.Type]] = {
    "str": mi.StrType,
    "bytes": mi.BytesType,
    "array": mi.ListType,
    "object": mi.DictType,
}


def _one_of(node: mi.Type | None, given: Any) -> str | None:
    """``must be one of a, b, got "c"`` for an enum (a ``Literal`` or an ``Enum``), None for any other type;
    ``one of a, b, or null`` when null is taken too (``Literal[...] | None``), which the list alone hid."""
    choices = _of(node, mi.LiteralType) or _of(node, mi.EnumType)
    values = (
        choices.values if isinstance(choices, mi.LiteralType) else [e.value for e in choices.cls] if choices else []
    )
    if not values:
        return None
    return f"{choices_words(values, null=_of(node, mi.NoneType) is not None)}{_got(given)}"


def translate(
    field: str, message: str, node: mi.Type | None, given: Any, rules: dict[str, str], *, secret: bool = False
) -> str | None:
    """``field: problem`` in our words for msgspec's ``message`` (its path taken off) about a value declared
    as ``node``, given as ``given`` (``MISSING`` if unknown); ``rules`` say what a regex means. None for a
    form not known here, which then keeps msgspec's words. A ``secret`` value is shown by its kind and length
    only (``got an array of 1 item``): a secret given in the wrong shape is still a secret."""
    if secret and given is not MISSING:
        given = _Withheld(given)
    problem = _problem(field, message, node, given, rules)
    return problem if problem is None or problem.startswith(f"{field}: ") else f"{field}: {problem}"


def _problem(field: str, message: str, node: mi.Type | None, given: Any, rules: dict[str, str]) -> str | None:
    if message == TOO_LARGE:
        return _too_large(field, node)
    if m := re.fullmatch(r"Expected `([a-z| ]+)`, got `\w+`", message):
        names = [name.strip() for name in m[1].split("|")]
        if names == ["int"] and (ranged := _range(field, _of(node, mi.IntType), given)):
            return ranged
        if set(names) <= {"str", "int", "null"} and (choices := _one_of(node, given)):
            return choices
        if names == ["bool"] and given is not MISSING:
            return f"must be true or false{_got(given)}" if isinstance(given, _Withheld) else not_boolean(field, given)
        if not all(name in _TYPES or name in _FORMATS for name in names):
            return None
        return f"must be {kind_words(*(_TYPES.get(name) or _FORMATS[name] for name in names))}{_got(given)}"
    if m := re.fullmatch(r"Expected `int` (>=|<=|>|<) (-?\d+)", message):
        return (
            _range(field, _of(node, mi.IntType), given) or f"must be an integer of {_WORDS[m[1]]} {m[2]}{_got(given)}"
        )
    if m := re.fullmatch(r"Expected `(?:int|float)` that's a multiple of (\S+)", message):
        return f"must be a multiple of {m[1]}{_got(given)}"
    if m := re.fullmatch(r"Expected `float` (>=|<=|>|<) (\S+)", message):
        words = _float_bounds(_of(node, mi.FloatType)) or f"{_WORDS[m[1]]} {m[2]}"
        return f"must be a number {words}{_got(given)}"
    if m := re.fullmatch(r"Expected `(str|bytes|array|object)` of length (>=|<=) (\d+)", message):
        declared = _of(node, _DECLARED[m[1]])
        low = declared.min_length if declared else int(m[3]) if m[2] == ">=" else None
        high = declared.max_length if declared else int(m[3]) if m[2] == "<=" else None
        size = None if m[1] == "bytes" else _size(given)
        short = isinstance(given, _Withheld) and m[1] == "str" and low is not None and 0 < (size or 0) < low
        return wrong_length(m[1], low, high, size) + (_SHORT_SECRET.format(low=low) if short else "")
    if m := re.fullmatch(
        r"Expected `array` of (?:at (least|most) )?length (\d+)(?: to (\d+))?(?:, got (\d+))?", message
    ):
        low = None if m[1] == "most" else int(m[2])
        high = int(m[3]) if m[3] else None if m[1] == "least" else int(m[2])
        return wrong_length("array", low, high, int(m[4]) if m[4] else _size(given))
    if m := re.fullmatch(r"Expected `str` matching regex (.+)", message):
        return rules.get(m[1]) or f"must match the regular expression {m[1]}"
    if re.fullmatch(r"Invalid (?:enum )?value .+", message):
        return _one_of(node, given)
    if message in _INVALID:
        return f"must be {_FORMATS[_INVALID[message]]}{_got(given)}"
    if m := re.fullmatch(r"Expected `(datetime|time)` with (a|no) timezone component", message):
        zone = "with a time zone offset (Z or +01:00)" if m[2] == "a" else "without a time zone offset"
        return f"must be {_FORMATS[m[1]]} {zone}{_got(given)}"
    return None


def _too_large(field: str, node: mi.Type | None) -> str:
    """A number larger than any float (``1e999``): what the field takes, and that it was too large."""
    got = ", got a number too large to represent"
    integer, number = _of(node, mi.IntType), _of(node, mi.FloatType)
    if integer is not None and (ranged := _range(field, integer, MISSING)):
        return f"{ranged}{got}"
    kinds = [_KIND_OF[type(t)] for t in _flat(node) if type(t) in _KIND_OF]
    if number is not None:
        words = _float_bounds(number)
        if words:
            return f"must be a number {words}{got}"
        if not kinds and integer is None:
            return f"must be a number{got}"
        # A union (an erasure's value): all it takes, and how large a number may be, not only "a number".
        taken = sorted({*kinds, "number", *(["integer"] if integer is not None else [])}, key=_ORDER.index)
        larger = "; a larger integer written out in its digits" if integer is not None and not _bounded(integer) else ""
        return f"must be {kind_words(*taken)} (a number of at most about 1.8e308, a 64-bit float{larger}){got}"
    if kinds:  # a number where none is taken: what is
        return f"must be {kind_words(*kinds)}{got}"
    return f"must be a number of at most about 1.8e308 in size (a 64-bit float){got}"


def _bounded(integer: mi.IntType) -> bool:
    return any(getattr(integer, name) is not None for name in ("ge", "gt", "le", "lt"))


_ORDER = ("boolean", "integer", "number", "string", "array", "object", "null")
"""msgspec's order of kinds in its ``Expected `bool | int | float | str``` (so both messages read alike)."""
_KIND_OF: dict[type, str] = {mi.StrType: "string", mi.BoolType: "boolean", mi.NoneType: "null"}
_KIND_OF |= {mi.ListType: "array", mi.DictType: "object", mi.StructType: "object"}


_JSON_KINDS = {bool: "bool", int: "int", float: "float", str: "str", list: "array", dict: "object", type(None): "null"}


def _refused(item: Any, message: str) -> bool | None:
    """Whether msgspec's ``message`` is about a value like ``item``; None when that cannot be told."""
    if m := re.search(r", got `(\w+)`$", message):
        return _JSON_KINDS.get(type(item)) == m[1]
    if m := re.fullmatch(r"Expected `str` of length (>=|<=) (\d+)", message):
        return isinstance(item, str) and (len(item) < int(m[2]) if m[1] == ">=" else len(item) > int(m[2]))
    if m := re.fullmatch(r"Expected `str` matching regex (.+)", message):
        return isinstance(item, str) and re.search(ast.literal_eval(m[1]), item) is None
    return None


def unhide_key(value: Any, where: str, message: str) -> str:
    """``where`` with msgspec's ``[...]`` (a dict's key, which it does not name) replaced by ``.key``: msgspec
    stops at the first entry it refuses, so that is the first entry like the one the message describes
    (``got `int```, a length, a pattern); ``where`` unchanged when that cannot be told."""
    head, sep, tail = where.partition("[...]")
    entries = locate(value, head) if sep and value is not MISSING else MISSING
    if not isinstance(entries, dict):
        return where
    key = next((k for k, item in entries.items() if _refused(item, message)), None)
    return where if key is None else f"{head}.{key}{tail}" if head else f"{key}{tail}"
