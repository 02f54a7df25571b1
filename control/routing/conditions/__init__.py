"""Condition trees: validated on write, compiled once into nested closures, run on every event.

A tree is a group ``{"op": "AND"|"OR", "children": [...]}`` or a leaf ``{"field", "operator", "value"?}``,
nested to any depth within the limits below. Semantics (docs/DECISIONS.md, "Condition trees"):

- ``field``: ``body`` (the whole parsed body), ``body.<dot.path>`` (a numeric segment indexes an array,
  and is an ordinary key on an object), ``header.<name>`` (case-insensitive; stored lowercased) or
  ``meta.<key>`` with a key of :data:`META_KEYS`. A body that is not JSON, a path that leads nowhere, an
  absent header and a null meta value are all *missing*.
- ``equals`` compares text forms (:func:`text_form`): strings as they are, numbers as JSON, ``true``,
  ``false``, ``null``, objects and arrays as compact JSON. So ``2000`` equals ``"2000"`` and ``true`` equals
  ``"true"``. A number in the event against a numeric value (``2000`` or ``"2000"``) compares as numbers,
  so ``2000.0`` equals ``2000`` too. ``not_equals`` is exactly its negation, so it alone is true on a
  missing field.
- ``contains``: substring on strings, membership (``equals`` per item) on arrays, key presence on objects,
  substring of the text form on numbers, booleans and null.
- ``exists``: the field is present, even when it is null; it takes no ``value``.
- ``regex``: an RE2 pattern (linear time, no backtracking), searched anywhere in the text form.
- Every operator but ``not_equals`` is false on a missing field. An empty ``AND`` matches every event, an
  empty ``OR`` matches none (the identities of the two operators).

Compiled predicates are pure, never raise on any :class:`EventView`, and are cached by the tree's
canonical JSON, so the flush worker may call :func:`compile_tree` per rule per batch.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import msgspec
import re2

from control.records.text import text_problem
from shared.errors import ValidationError

__all__ = (
    "ALWAYS",
    "LABEL_PREFIX",
    "MAX_DEPTH",
    "MAX_ENCODED_BYTES",
    "MAX_FIELD_LENGTH",
    "MAX_NODES",
    "MAX_PATTERN_LENGTH",
    "META_KEYS",
    "MISSING",
    "OPERATORS",
    "EventView",
    "InvalidConditionTree",
    "Predicate",
    "compile_tree",
    "getter",
    "matches",
    "text_form",
    "validate",
)

MAX_DEPTH = 32
"""Levels of nesting: the root is level 1."""
MAX_NODES = 256
"""Groups and leaves together."""
MAX_ENCODED_BYTES = 64 * 1024
"""The normalised tree encoded as compact JSON."""
MAX_PATTERN_LENGTH = 1000
MAX_FIELD_LENGTH = 1000

OPERATORS: Final = ("equals", "not_equals", "contains", "exists", "regex")
META_KEYS: Final = (
    "provider",
    "event_type",
    "method",
    "path",
    "content_type",
    "source_ip",
    "signature_valid",
    "ip_allowed",
    "endpoint_id",
    "environment",
)
_META = frozenset(META_KEYS)
LABEL_PREFIX: Final = "label."
"""``meta.label.<key>``: the value of the event's label ``<key>`` (labels are computed before routing)."""
_LABEL_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")  # control.records.labels.OUTPUT_KEY
_GROUP_KEYS = ("op", "children")
_LEAF_KEYS = ("field", "operator", "value")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_INDEX_DIGITS = 18  # no array is longer; a longer numeric segment can only be an object key


class _Missing:
    """The value of a field the event does not have (and the body of an event whose body is not JSON)."""

    __slots__ = ()
    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()


class InvalidConditionTree(ValidationError):
    """400 ``invalid_condition_tree``; the message starts with the path of the offending node or key,
    e.g. ``condition_tree.children[1].operator: unknown operator "gt"``."""

    code = "invalid_condition_tree"


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class EventView(NamedTuple):
    """What a condition tree can see of an event. Immutable; a named tuple rather than a frozen dataclass
    because the flush builds one per routed event, and a frozen dataclass takes twice as long to make."""

    body: object = MISSING
    """The parsed JSON body (dict, list, str, number, bool or None), or MISSING when the body is not JSON."""
    headers: Mapping[str, str] = _EMPTY
    """Lowercased names; repeated headers joined with ", "."""
    meta: Mapping[str, object] = _EMPTY
    """Keys of META_KEYS; a None value counts as missing."""


Predicate = Callable[[EventView], bool]


# -- text forms ---------------------------------------------------------------------------------------

_encode = msgspec.json.Encoder().encode
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def text_form(value: object) -> str:
    """The text a value is compared as: strings as they are, numbers as JSON (``2000``, ``20.5``),
    ``true``/``false``/``null``, objects and arrays as compact JSON. Never raises."""
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    try:
        return _encode(value).decode()
    except Exception:  # noqa: BLE001 - not JSON (lone surrogates, foreign objects): a stable text anyway
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
        except Exception:  # noqa: BLE001 - e.g. a circular structure
            return repr(value)


def _as_number(value: object) -> int | float | None:
    """The number a rule value stands for (``2000``, ``"2000"``, ``"2e3"``), or None."""
    if type(value) is int or type(value) is float:
        return value
    if isinstance(value, str) and len(value) <= 400 and _JSON_NUMBER.fullmatch(value):
        try:
            number: int | float = float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


# -- validation ---------------------------------------------------------------------------------------


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _quote(value: object, limit: int = 100) -> str:
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    return json.dumps(text.encode("utf-8", "replace").decode(), ensure_ascii=False)


def _key_path(path: str, key: object) -> str:
    text = key if isinstance(key, str) else repr(key)
    if len(text) > 100:
        text = text[:100] + "…"
    return f"{path}.{text.encode('utf-8', 'replace').decode()}"


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.never_capture = True  # groups are never read; RE2 then needs less memory and time


@functools.lru_cache(maxsize=4096)
def _regex(pattern: str) -> Any:
    return re2.compile(pattern, _RE2_OPTIONS)


def _regex_error(pattern: str) -> str | None:
    try:
        _regex(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return f"invalid RE2 pattern: {reason}"
    except UnicodeEncodeError:
        return "invalid RE2 pattern: not valid Unicode"
    return None


class _Walk:
    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes = 0

    def node(self, node: object, path: str, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise InvalidConditionTree(f"{path}: nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise InvalidConditionTree(f"{path}: the tree has more than {MAX_NODES} nodes")
        if not isinstance(node, dict):
            raise InvalidConditionTree(
                f"{path}: must be an object, a group {{op, children}} or a leaf {{field, operator, value}}, "
                f"got {_json_type(node)}"
            )
        if "op" in node or "children" in node:
            return self.group(node, path, depth)
        if "field" in node or "operator" in node:
            return self.leaf(node, path)
        if node:
            key = next(iter(node))
            raise InvalidConditionTree(
                f"{_key_path(path, key)}: unknown key; a group has op and children, a leaf field, operator and value"
            )
        raise InvalidConditionTree(
            f"{path}: empty object; expected a group {{op, children}} or a leaf {{field, operator, value}}"
        )

    def group(self, node: dict[Any, Any], path: str, depth: int) -> dict[str, Any]:
        for key in node:
            if key not in _GROUP_KEYS:
                raise InvalidConditionTree(f"{_key_path(path, key)}: unknown key; a group has only op and children")
        if "op" not in node:
            raise InvalidConditionTree(f'{path}.op: required in a group ("AND" or "OR")')
        op = node["op"]
        if op not in ("AND", "OR") or not isinstance(op, str):
            got = _quote(op) if isinstance(op, str) else _json_type(op)
            raise InvalidConditionTree(f'{path}.op: must be "AND" or "OR", got {got}')
        if "children" not in node:
            raise InvalidConditionTree(f"{path}.children: required in a group (an array, may be empty)")
        children = node["children"]
        if not isinstance(children, list):
            raise InvalidConditionTree(f"{path}.children: must be an array, got {_json_type(children)}")
        return {
            "op": op,
            "children": [self.node(child, f"{path}.children[{i}]", depth + 1) for i, child in enumerate(children)],
        }

    def leaf(self, node: dict[Any, Any], path: str) -> dict[str, Any]:
        for key in node:
            if key not in _LEAF_KEYS:
                raise InvalidConditionTree(
                    f"{_key_path(path, key)}: unknown key; a leaf has only field, operator and value"
                )
        out: dict[str, Any] = {"field": _field(node, path), "operator": _operator(node, path)}
        operator = out["operator"]
        where = f"{path}.value"
        if operator == "exists":
            if "value" in node:
                raise InvalidConditionTree(f'{where}: not allowed for operator "exists"')
            return out
        if "value" not in node:
            raise InvalidConditionTree(f'{where}: required for operator "{operator}"')
        value = node["value"]
        if isinstance(value, str):
            _storable(value, where)
        if operator == "regex":
            if not isinstance(value, str):
                raise InvalidConditionTree(
                    f'{where}: must be a string (an RE2 pattern) for operator "regex", got {_json_type(value)}'
                )
            if len(value) > MAX_PATTERN_LENGTH:
                raise InvalidConditionTree(f"{where}: pattern longer than {MAX_PATTERN_LENGTH} characters")
            problem = _regex_error(value)
            if problem:
                raise InvalidConditionTree(f"{where}: {problem}")
        elif not (value is None or isinstance(value, str | bool | int | float)):
            raise InvalidConditionTree(f"{where}: must be a string, number, boolean or null, got {_json_type(value)}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidConditionTree(f"{where}: must be a finite number")
        out["value"] = value
        return out


def _storable(text: str, where: str) -> None:
    """Trees are stored as jsonb: no NUL, no lone surrogates (``text_problem``)."""
    if (problem := text_problem(text)) is not None:
        raise InvalidConditionTree(f"{where}: {problem}")


def _field(node: dict[Any, Any], path: str) -> str:
    where = f"{path}.field"
    if "field" not in node:
        raise InvalidConditionTree(f"{where}: required in a leaf (body.<path>, header.<name> or meta.<key>)")
    name = node["field"]
    if not isinstance(name, str):
        raise InvalidConditionTree(f"{where}: must be a string, got {_json_type(name)}")
    _storable(name, where)
    if len(name) > MAX_FIELD_LENGTH:
        raise InvalidConditionTree(f"{where}: longer than {MAX_FIELD_LENGTH} characters")
    if name == "body":
        return name
    kind, dot, rest = name.partition(".")
    if kind == "body" and dot:
        if "" in rest.split("."):
            raise InvalidConditionTree(f"{where}: empty path segment in {_quote(name)}")
        return name
    if kind == "header" and dot:
        if not _HEADER_NAME.fullmatch(rest):
            raise InvalidConditionTree(f"{where}: {_quote(rest)} is not a valid header name")
        return f"header.{rest.lower()}"
    if kind == "meta" and dot:
        if rest.startswith(LABEL_PREFIX):
            if not _LABEL_KEY.fullmatch(rest.removeprefix(LABEL_PREFIX)):
                raise InvalidConditionTree(
                    f"{where}: {_quote(rest)} is not a label key (letters, digits, _ and -, at most 64)"
                )
            return name
        if rest not in _META:
            raise InvalidConditionTree(
                f"{where}: unknown meta key {_quote(rest)}; one of {', '.join(META_KEYS)} or label.<key>"
            )
        return name
    raise InvalidConditionTree(f"{where}: must be body, body.<path>, header.<name> or meta.<key>, got {_quote(name)}")


def _operator(node: dict[Any, Any], path: str) -> str:
    where = f"{path}.operator"
    if "operator" not in node:
        raise InvalidConditionTree(f"{where}: required in a leaf (one of {', '.join(OPERATORS)})")
    operator = node["operator"]
    if not isinstance(operator, str):
        raise InvalidConditionTree(f"{where}: must be a string, got {_json_type(operator)}")
    if operator not in OPERATORS:
        raise InvalidConditionTree(f"{where}: unknown operator {_quote(operator)}")
    return operator


def validate(tree: object, *, path: str = "condition_tree") -> dict[str, Any]:
    """The normalised tree to store (header names lowercased, keys in a fixed order), or
    :class:`InvalidConditionTree` naming the first problem's path. Never raises anything else."""
    normalised = _Walk().node(tree, path, 1)
    try:
        size = len(_encode(normalised))
    except (UnicodeEncodeError, msgspec.EncodeError, TypeError, ValueError, OverflowError):
        raise InvalidConditionTree(f"{path}: contains text that is not valid Unicode") from None
    if size > MAX_ENCODED_BYTES:
        raise InvalidConditionTree(f"{path}: larger than {MAX_ENCODED_BYTES} bytes as JSON ({size} bytes)")
    return normalised


# -- compilation ----------------------------------------------------------------------------------


def _always(event: EventView) -> bool:
    return True


ALWAYS: Final[Predicate] = _always
"""What a tree that matches every event (an empty AND, however nested) compiles to: callers may skip
building the event's view for it."""


def _never(event: EventView) -> bool:
    return False


Getter = Callable[[EventView], object]


def getter(field: str) -> Getter:
    """What ``field`` (``body``, ``body.<path>``, ``header.<name>`` lowercased, ``meta.<key>``) reads from an
    event: the value, or MISSING. Label rules read their body paths and headers through it too, so a path
    means the same in a label as in a condition."""
    return _getter(field)


def _getter(name: str) -> Getter:
    if name == "body":
        return lambda event: event.body
    kind, _, rest = name.partition(".")
    if kind == "header":

        def header(event: EventView) -> object:
            value = event.headers.get(rest)
            return MISSING if value is None else value

        return header
    if kind == "meta":

        def meta(event: EventView) -> object:
            value = event.meta.get(rest)
            return MISSING if value is None else value

        return meta
    steps = tuple(
        (s, int(s) if s.isascii() and s.isdigit() and len(s) <= _MAX_INDEX_DIGITS else None) for s in rest.split(".")
    )

    def body(event: EventView) -> object:
        value = event.body
        for key, index in steps:
            if isinstance(value, dict):
                value = value.get(key, MISSING)
                if value is MISSING:
                    return MISSING
            elif isinstance(value, list):
                if index is None or index >= len(value):
                    return MISSING
                value = value[index]
            else:
                return MISSING
        return value

    return body


Test = Callable[[object], bool]


def _equals(value: object) -> Test:
    expected = text_form(value)
    number = _as_number(value)
    if number is None:

        def equals(actual: object) -> bool:
            if actual is MISSING:
                return False
            if type(actual) is str:
                return actual == expected
            return text_form(actual) == expected

        return equals

    def equals_number(actual: object) -> bool:
        if actual is MISSING:
            return False
        kind = type(actual)
        if kind is int or kind is float:
            return actual == number
        if kind is str:
            return actual == expected
        return text_form(actual) == expected

    return equals_number


def _test(operator: str, value: object) -> Test:
    if operator == "exists":
        return lambda actual: actual is not MISSING
    if operator == "equals":
        return _equals(value)
    if operator == "not_equals":
        equals = _equals(value)
        return lambda actual: not equals(actual)
    if operator == "contains":
        return _contains(value)
    if operator == "regex":
        return _search(value)  # type: ignore[arg-type]
    raise InvalidConditionTree(f'operator: unknown operator "{operator}"')


def _contains(value: object) -> Test:
    needle = text_form(value)
    equals = _equals(value)

    def contains(actual: object) -> bool:
        if actual is MISSING:
            return False
        if isinstance(actual, str):
            return needle in actual
        if isinstance(actual, list):
            return any(equals(item) for item in actual)
        if isinstance(actual, dict):
            return needle in actual
        return needle in text_form(actual)

    return contains


def _search(pattern: str) -> Test:
    found = _searcher(pattern)

    def search(actual: object) -> bool:
        if actual is MISSING:
            return False
        return found(actual if isinstance(actual, str) else text_form(actual))

    return search


def _searcher(pattern: str) -> Callable[[str], bool]:
    """Whether the pattern matches anywhere in a text (google-re2's public API only: its private
    internals would save a few microseconds per regex leaf at the price of breaking on any release)."""
    compiled = _regex(pattern)

    def search(text: str) -> bool:
        return compiled.search(text.encode("utf-8", "replace").decode()) is not None  # lone surrogates → "?"

    return search


def _build(node: dict[str, Any]) -> Predicate:
    if "op" in node:
        children = [_build(child) for child in node["children"]]
        if node["op"] == "AND":
            return _all(children)
        return _any(children)
    get = _getter(node["field"])
    test = _test(node["operator"], node.get("value"))
    return lambda event: test(get(event))


def _all(children: list[Predicate]) -> Predicate:
    # Predicates are pure and never raise, so constant children fold away: an AND of empty ANDs is ALWAYS
    # (a forward-all rule however it is spelled), and an AND with an empty OR never matches.
    if _never in children:
        return _never
    children = [c for c in children if c is not _always]
    if not children:
        return _always
    if len(children) == 1:
        return children[0]
    if len(children) == 2:
        first, second = children
        return lambda event: first(event) and second(event)
    predicates = tuple(children)

    def every(event: EventView) -> bool:
        for predicate in predicates:  # noqa: SIM110 - a plain loop: no generator object per event
            if not predicate(event):
                return False
        return True

    return every


def _any(children: list[Predicate]) -> Predicate:
    if _always in children:
        return _always
    children = [c for c in children if c is not _never]
    if not children:
        return _never
    if len(children) == 1:
        return children[0]
    if len(children) == 2:
        first, second = children
        return lambda event: first(event) or second(event)
    predicates = tuple(children)

    def some(event: EventView) -> bool:
        for predicate in predicates:  # noqa: SIM110 - a plain loop: no generator object per event
            if predicate(event):
                return True
        return False

    return some


@functools.lru_cache(maxsize=4096)
def _compile_canonical(canonical: bytes) -> Predicate:
    return _build(validate(msgspec.json.decode(canonical)))


def compile_tree(tree: dict[str, Any]) -> Predicate:
    """The tree as a predicate over :class:`EventView`; cached by the tree's canonical JSON.

    The tree is validated again on a cache miss (cheap next to compiling), so a tree that is not valid,
    e.g. one stored before a limit was lowered, raises :class:`InvalidConditionTree` here instead of
    matching something unintended. Callers treat that as a rule that matches nothing.
    """
    try:
        canonical = _encode_sorted(tree)
    except (UnicodeEncodeError, msgspec.EncodeError, TypeError, ValueError, OverflowError):
        raise InvalidConditionTree("condition_tree: not a JSON value") from None
    return _compile_canonical(canonical)


def matches(tree: dict[str, Any], event: EventView) -> bool:
    """Whether the event matches the tree (compiled through the cache)."""
    return compile_tree(tree)(event)
