"""Condition trees: validated on write, compiled once into nested closures, run on every event.

A tree is a group ``{"op": "AND"|"OR", "children": [...]}`` or a leaf ``{"field", "operator", "value"?}``,
nested to any depth within the limits below. Semantics (docs/reference/routing.md):

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
- ``regex``: an RE2 pattern (linear time, no backtracking), searched anywhere in the first
  :data:`MAX_REGEX_SCAN` characters of the text form; a tree's patterns together compile to at most
  :data:`MAX_REGEX_PROGRAM` RE2 instructions, an endpoint's rules to :data:`MAX_ENDPOINT_REGEX_PROGRAM` (ADR
  0094: what one account's rules may cost the shared flush per event).
- Every operator but ``not_equals`` is false on a missing field. An empty ``AND`` matches every event, an
  empty ``OR`` matches none (the identities of the two operators).

Compiled predicates are pure, never raise on any :class:`EventView`, and are cached by the tree's
canonical JSON, so the flush worker may call :func:`compile_tree` per rule per batch.

One module per idea: ``tree`` (the vocabulary both sides share: operators, meta keys, MISSING, the event
view, the error), ``validation`` (on write: the normalised tree or the first problem by its path, and the
limits), ``compilation`` (in the flush: the tree as nested closures, cached), ``text`` (the text form values
are compared as, which label rules use too). Callers import from here.
"""

from __future__ import annotations

from control.routing.conditions.compilation import ALWAYS, Getter, compile_tree, getter, matches
from control.routing.conditions.text import text_form
from control.routing.conditions.tree import (
    LABEL_PREFIX,
    META_KEYS,
    MISSING,
    OPERATORS,
    EventView,
    InvalidConditionTree,
    Predicate,
)
from control.routing.conditions.validation import (
    MAX_DEPTH,
    MAX_ENCODED_BYTES,
    MAX_ENDPOINT_REGEX_PROGRAM,
    MAX_FIELD_LENGTH,
    MAX_NODES,
    MAX_PATTERN_LENGTH,
    MAX_REGEX_PROGRAM,
    MAX_REGEX_SCAN,
    regex_program,
    validate,
)

__all__ = (
    "ALWAYS",
    "LABEL_PREFIX",
    "MAX_DEPTH",
    "MAX_ENCODED_BYTES",
    "MAX_ENDPOINT_REGEX_PROGRAM",
    "MAX_FIELD_LENGTH",
    "MAX_NODES",
    "MAX_PATTERN_LENGTH",
    "MAX_REGEX_PROGRAM",
    "MAX_REGEX_SCAN",
    "META_KEYS",
    "MISSING",
    "OPERATORS",
    "EventView",
    "Getter",
    "InvalidConditionTree",
    "Predicate",
    "compile_tree",
    "getter",
    "matches",
    "regex_program",
    "text_form",
    "validate",
)
