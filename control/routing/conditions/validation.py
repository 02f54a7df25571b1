"""Validation of a condition tree on write: the normalised tree to store, or the first problem by its path.

Apart from compilation because it runs at a different time for a different reader: on every rule write
(``control.service.rules``, ``control.service.destinations.crud``), for a caller who needs to know exactly which
node is wrong (``condition_tree.children[1].operator: unknown operator "gt"``); compilation runs in the
flush and only needs a tree that is known to be valid. The limits (depth, nodes, encoded size, pattern and
field length) bound what a caller can make the flush do per event. The RE2 cache is here because a pattern
is first compiled when it is validated; compilation reuses it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec
import re2

from control.records.fields import HEADER_NAME, LABEL_KEY
from control.records.storable import text_problem
from control.routing.conditions.tree import LABEL_PREFIX, META_KEYS, OPERATORS, InvalidConditionTree
from control.support.parameter_messages import shown
from shared.bytes_lru import memoize
from shared.providers import NAMES, canonical

__all__ = (
    "MAX_DEPTH",
    "MAX_ENCODED_BYTES",
    "MAX_ENDPOINT_REGEX_PROGRAM",
    "MAX_FIELD_LENGTH",
    "MAX_NODES",
    "MAX_PATTERN_LENGTH",
    "MAX_REGEX_PROGRAM",
    "MAX_REGEX_SCAN",
    "regex",
    "regex_program",
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
MAX_REGEX_SCAN = 16 * 1024
"""Characters of a value's text form a ``regex`` leaf searches (its start): the flush routes every account's
events in one loop, so what one event's rules may cost is bounded by what they read, not by the body limit
(1 MiB: a pattern RE2 runs as an NFA took seconds per 900 KB body; ADR 0094)."""
MAX_REGEX_PROGRAM = 2000
"""RE2 instructions (``programsize``) of a tree's patterns together: with :data:`MAX_REGEX_SCAN` it bounds one
event's regex work by one tree to about 40 ms even when RE2 falls back from its DFA (measured 1.2 ns per
instruction and character at worst); ordinary patterns are 20 to 100 instructions (ADR 0094)."""
MAX_ENDPOINT_REGEX_PROGRAM = 4000
"""The same for all rules of an endpoint together (every one runs on each event): about 80 ms per event."""

_META = frozenset(META_KEYS)
_LABEL_KEY = re.compile(LABEL_KEY)
_GROUP_KEYS = ("op", "children")
_LEAF_KEYS = ("field", "operator", "value")
_HEADER_NAME = re.compile(HEADER_NAME)
_PROVIDER = "meta.provider"

_encode = msgspec.json.Encoder().encode


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


_REGEX_BASE_WEIGHT = 8 * 1024
"""An RE2 object's own structures beside its program (outside Python's heap, so estimated)."""


def _regex_weight(compiled: Any) -> int:
    return _REGEX_BASE_WEIGHT + 32 * int(compiled.programsize)


@memoize(16 * 1024 * 1024, size=_regex_weight)
def regex(pattern: str) -> Any:
    """The compiled RE2 pattern (cached, bounded in bytes); raises ``re2.error`` for one RE2 refuses."""
    return re2.compile(pattern, _RE2_OPTIONS)


def _regex_error(pattern: str) -> str | None:
    try:
        regex(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return f"invalid RE2 pattern: {reason}"
    except UnicodeEncodeError:
        return "invalid RE2 pattern: not valid Unicode"
    return None


class _Walk:
    __slots__ = ("nodes", "program", "writing")

    def __init__(self, *, writing: bool) -> None:
        self.nodes = 0
        self.program = 0
        self.writing = writing

    def node(self, node: object, path: str, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise InvalidConditionTree(f"{path}: nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise InvalidConditionTree(f"{path}: the tree has more than {MAX_NODES} nodes")
        if not isinstance(node, dict):
            raise InvalidConditionTree(
                f"{path}: must be an object, a group {{op, children}} or a leaf {{field, operator, value}}, "
                f"got {shown(node)}"
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
            got = _quote(op) if isinstance(op, str) else shown(op)
            raise InvalidConditionTree(f'{path}.op: must be "AND" or "OR", got {got}')
        if "children" not in node:
            raise InvalidConditionTree(f"{path}.children: required in a group (an array, may be empty)")
        children = node["children"]
        if not isinstance(children, list):
            raise InvalidConditionTree(f"{path}.children: must be an array, got {shown(children)}")
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
                    f'{where}: must be a string (an RE2 pattern) for operator "regex", got {shown(value)}'
                )
            if len(value) > MAX_PATTERN_LENGTH:
                raise InvalidConditionTree(f"{where}: pattern longer than {MAX_PATTERN_LENGTH} characters")
            problem = _regex_error(value)
            if problem:
                raise InvalidConditionTree(f"{where}: {problem}")
            self.program += int(regex(value).programsize)
            if self.writing and self.program > MAX_REGEX_PROGRAM:
                raise InvalidConditionTree(
                    f"{where}: the tree's patterns compile to {self.program} RE2 instructions with this one, more "
                    f"than the {MAX_REGEX_PROGRAM} a tree may run over each event; use fewer or simpler patterns"
                )
        elif not (value is None or isinstance(value, str | bool | int | float)):
            raise InvalidConditionTree(f"{where}: must be a string, number, boolean or null, got {shown(value)}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidConditionTree(f"{where}: must be a finite number")
        if out["field"] == _PROVIDER and operator in ("equals", "not_equals"):
            value = self.provider(value, where)
        out["value"] = value
        return out

    def provider(self, value: object, where: str) -> object:
        """A provider as the catalog names it (``github`` is ``code_host``), the name events are stored with,
        so the rule means what the event list's ``provider`` filter means. A name the catalog does not know
        could never match (or, with ``not_equals``, would match everything): refused on write, with the names
        it takes; a tree stored before that check keeps it (compilation re-validates with ``writing=False``)."""
        own = canonical(value) if isinstance(value, str) else None
        if own is not None:
            return own
        if self.writing:
            raise InvalidConditionTree(
                f"{where}: {_quote(value) if isinstance(value, str) else shown(value)} is not a provider; "
                f"meta.provider is one of {', '.join(sorted(NAMES))} (an alias is stored as its provider's name)"
            )
        return value


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
        raise InvalidConditionTree(f"{where}: must be a string, got {shown(name)}")
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
        raise InvalidConditionTree(f"{where}: must be a string, got {shown(operator)}")
    if operator not in OPERATORS:
        raise InvalidConditionTree(f"{where}: unknown operator {_quote(operator)}; one of {', '.join(OPERATORS)}")
    return operator


def regex_program(tree: object) -> int:
    """RE2 instructions of a stored tree's patterns together (one RE2 no longer takes counts nothing: the
    flush skips its rule)."""
    if not isinstance(tree, dict):
        return 0
    if "children" in tree:
        return sum(regex_program(child) for child in tree["children"] or ())
    value = tree.get("value")
    if tree.get("operator") != "regex" or not isinstance(value, str):
        return 0
    try:
        return int(regex(value).programsize)
    except (re2.error, UnicodeEncodeError):
        return 0


def validate(tree: object, *, path: str = "condition_tree", writing: bool = True) -> dict[str, Any]:
    """The normalised tree to store (header names lowercased, a ``meta.provider`` name as the catalog's own,
    keys in a fixed order), or :class:`InvalidConditionTree` naming the first problem's path. Never raises
    anything else.

    ``writing=False`` (compilation of a stored tree) keeps a provider name the catalog does not know instead of
    refusing it, and leaves out :data:`MAX_REGEX_PROGRAM`: a tree the API confirmed before either check keeps
    routing as confirmed, its searches bounded by :data:`MAX_REGEX_SCAN`."""
    normalised = _Walk(writing=writing).node(tree, path, 1)
    try:
        size = len(_encode(normalised))
    except (UnicodeEncodeError, msgspec.EncodeError, TypeError, ValueError, OverflowError):
        raise InvalidConditionTree(f"{path}: contains text that is not valid Unicode") from None
    if size > MAX_ENCODED_BYTES:
        raise InvalidConditionTree(f"{path}: larger than {MAX_ENCODED_BYTES} bytes as JSON ({size} bytes)")
    return normalised
