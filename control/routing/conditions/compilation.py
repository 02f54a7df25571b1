"""Compilation of a valid condition tree into nested closures, run by the flush on every routed event.

Apart from validation because this is the hot path and is shaped for it: each leaf becomes a getter and a
test chosen once (a number rule compares numbers, a string rule strings), each group a loop over its
children with constant children folded away, so running a rule is a few Python calls per leaf and never
builds a view of the event a rule cannot see. Compiled predicates are pure, never raise on any
:class:`~control.routing.conditions.tree.EventView`, and are cached by the tree's canonical JSON, so the
flush worker may call :func:`compile_tree` per rule per batch.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

import msgspec

from control.routing.conditions.text import as_number, text_form
from control.routing.conditions.tree import MISSING, EventView, InvalidConditionTree, Predicate
from control.routing.conditions.validation import MAX_REGEX_SCAN, regex, validate
from shared.bytes_lru import BytesLRU
from shared.providers import NAMES

__all__ = ("ALWAYS", "Getter", "compile_tree", "getter", "matches")

_MAX_INDEX_DIGITS = 18  # no array is longer; a longer numeric segment can only be an object key
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


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


def _float(number: object) -> float | None:
    """A number as a double; None past its range. An integer meets a float at a float's precision: a JSON
    number written with a fraction or an exponent was rounded to a double when decoded, and a stored rule or
    erasure value comes back from jsonb as digits (``1e308`` as 309 of them), so both sides are rounded alike.
    Two integers compare exactly, at any size."""
    try:
        return float(number)  # type: ignore[arg-type]  # a decoded JSON number (int or float) or jsonb's digits
    except OverflowError:
        return None


def _equals(value: object) -> Test:
    expected = text_form(value)
    number = as_number(value)
    if number is None:

        def equals(actual: object) -> bool:
            if actual is MISSING:
                return False
            if type(actual) is str:
                return actual == expected
            return text_form(actual) == expected

        return equals

    as_float = _float(number)
    number_is_int = type(number) is int

    def equals_number(actual: object) -> bool:
        if actual is MISSING:
            return False
        kind = type(actual)
        if kind is int:
            return actual == number if number_is_int else _float(actual) == number
        if kind is float:
            return actual == as_float
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
        return _search(value)  # type: ignore[arg-type]  # validation refuses a regex that is not a str
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
    """Whether the pattern matches within the first ``MAX_REGEX_SCAN`` characters of a text (google-re2's
    public API only: its private internals would save a few microseconds per regex leaf at the price of
    breaking on any release). The bound is what keeps one account's patterns from holding every account's
    flush: RE2 is linear in the text, but its factor is the pattern's program when it leaves its DFA."""
    compiled = regex(pattern)

    def search(text: str) -> bool:
        text = text[: MAX_REGEX_SCAN + 1].encode("utf-8", "replace").decode()  # lone surrogates → "?"
        # The character past the bound stays as context: ``$`` and ``\b`` never take the cut for an end.
        return compiled.search(text, 0, MAX_REGEX_SCAN) is not None

    return search


def _build(node: dict[str, Any]) -> Predicate:
    if "op" in node:
        children = [_build(child) for child in node["children"]]
        if node["op"] == "AND":
            return _all(children)
        return _any(children)
    get = _getter(node["field"])
    test = _test(node["operator"], node.get("value"))
    if node["field"] == "meta.provider" and node["operator"] in ("contains", "regex"):
        return _provider_among(test, get)
    return lambda event: test(get(event))


def _provider_among(test: Test, get: Getter) -> Predicate:
    """``contains`` or ``regex`` on ``meta.provider``: true of a provider when true of its own name or any of
    its aliases (``regex: "github"`` matches ``code_host``), as the event list's filter takes either. Events
    carry the catalog's own names, so the answer for each is found once here and an event costs one dict
    lookup; any other value is tested as it is (validation makes ``equals`` and ``not_equals`` values the
    catalog's own names instead)."""
    verdicts: dict[object, bool] = {}
    for name, own in NAMES.items():
        verdicts[own] = verdicts.get(own, False) or test(name)

    def among(event: EventView) -> bool:
        found = verdicts.get(event.meta.get("provider"))
        return test(get(event)) if found is None else found

    return among


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


_COMPILED_WEIGHT_PER_BYTE = 32
"""What a compiled tree holds per byte of its canonical JSON: closures, cells and getters measured at 18-27
times the JSON's size (tracemalloc, 200-leaf trees), rounded up."""
_COMPILED: BytesLRU[bytes, tuple[Predicate, int]] = BytesLRU(64 * 1024 * 1024, size=operator.itemgetter(1))
"""Compiled trees of every account's rules, bounded in bytes (a tree is at most ``MAX_ENCODED_BYTES``)."""


def _compile_canonical(canonical: bytes) -> Predicate:
    found = _COMPILED.get(canonical)
    if found is not None:
        return found[0]
    predicate = _build(validate(msgspec.json.decode(canonical), writing=False))
    _COMPILED.put(canonical, (predicate, _COMPILED_WEIGHT_PER_BYTE * len(canonical)))
    return predicate


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
