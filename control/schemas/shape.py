"""An event body's shape: a cheap hashable signature, and what learning needs from it, compiled once.

Learning runs in the flush on every new event, so its cost per event must stay a small fraction of storing
it. The body is decoded once (msgspec) and ``signature`` walks it into nested tuples of key names and type
codes: no paths, no strings built. Real traffic repeats a handful of shapes, so ``Shapes.of`` finds the
compiled ``Shape`` (paths with their types, the objects whose children can be missing, the id-like fields
to read values from) by that signature: stable traffic costs a decode, a walk and a dict lookup.

Paths are dot paths (``data.object.amount``); the items of an array are ``items[]``. A key holding ``.``,
``\\`` or or ``[`` has a backslash before each of those (``split_path`` reads it back). Keys that
cannot be stored as text (NUL, lone surrogates) are left out. Walking stops at ``MAX_DEPTH`` (deeper values
are typed but not opened) and looks at the first ``MAX_ITEMS`` items of an array.

A body contributes at most ``MAX_PATHS`` paths, as many as its schema can hold (real payloads have up to a few
hundred: 561 in the largest of GitHub's published examples). Every bound is kept as "not looked at", never as
"missing": a ``Shape`` lists in ``objects`` only the objects whose every key was recorded, and a field counts as
absent only where its parent is one of those, so a body cut by a bound is no evidence that a field is absent.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from control.records.storable import text_problem
from shared.bytes_lru import BytesLRU

__all__ = (
    "MAX_DEPTH",
    "MAX_ITEMS",
    "Shape",
    "Shapes",
    "is_id_like",
    "join_key",
    "parent_path",
    "signature",
    "split_path",
)

MAX_DEPTH = 16
MAX_ITEMS = 32
MAX_PATHS = 2000
"""Paths one body contributes, and one schema holds (``control.schemas.state``): a body with more (a map keyed
by data) is learned in part, and where it was cut nothing counts as absent."""
_MAX_CACHED_BYTES = 128 * 1024 * 1024
"""What the compiled shapes of one process's cache may weigh, however few paths that is (a hostile sender's
every body can be a new 2,000-path shape)."""
_PATH_BYTES = 128
"""A cached shape's cost per path beside twice its text (226 bytes a path of 107 characters measured with
tracemalloc: the path, its entries in the shape's sets, its part of the signature)."""

_CODE: dict[Any, str] = {str: "s", int: "i", float: "n", bool: "b", type(None): "z"}
_code = _CODE.get
_NAMES = {"s": "string", "i": "integer", "n": "number", "b": "boolean", "z": "null", "o": "object", "a": "array"}
_OPAQUE_OBJECT, _OPAQUE_ARRAY, _EMPTY_ARRAY = "o", "a", "[]"
_ID_NAME = re.compile(
    r"(?:^|[_-])(?:id|uuid|guid)$|[a-z0-9](?:Id|ID|Uuid|UUID)$|^e?mail$|^email_address$"
    # names that hold another object's id when their value is a string or a number (``customer: "cus_1"``)
    r"|^(?:customer|user|account|invoice|order|charge|subscription|payment_intent|session|organization)$",
    re.I,
)


def signature(value: Any) -> Any:
    """The shape of a decoded JSON value as nested tuples: ``(keys, value signatures)`` for an object,
    ``("[", frozenset of item signatures)`` for an array, a one-letter code for a scalar. One list
    comprehension per container and a dict lookup per scalar (about 1.5 us for a small event); the depth
    limit is applied when a new signature is compiled, and a body too deep for Python's recursion limit is
    not learned (``Shapes.of`` raises RecursionError)."""
    t = type(value)
    if t is dict:
        return (tuple(value), tuple([_code(type(v)) or signature(v) for v in value.values()]))
    if t is list:
        if not value:
            return _EMPTY_ARRAY
        return ("[", frozenset([_code(type(v)) or signature(v) for v in value[:MAX_ITEMS]]))
    return _code(t, "z")


def join_key(prefix: str, key: str) -> str:
    if "." in key or "\\" in key or "[" in key:
        key = key.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[")
    return f"{prefix}.{key}" if prefix else key


def split_path(path: str) -> list[tuple[str, int]]:
    """``a.b\\.c.items[][]`` → ``[("a", 0), ("b.c", 0), ("items", 2)]``: each key and how many array levels
    follow it."""
    out: list[tuple[str, int]] = []
    if "\\" not in path:  # no escaped key (the usual case): every "." separates, every "[]" is an array level
        for part in path.split("."):
            levels = 0
            while part.endswith("[]"):
                part = part[:-2]
                levels += 1
            out.append((part, levels))
        return out
    key: list[str] = []
    levels = i = 0
    n = len(path)
    while i < n:
        c = path[i]
        if c == "\\" and i + 1 < n:
            key.append(path[i + 1])
            i += 2
        elif c == ".":
            out.append(("".join(key), levels))
            key, levels = [], 0
            i += 1
        elif path.startswith("[]", i):
            levels += 1
            i += 2
        else:
            key.append(c)
            i += 1
    out.append(("".join(key), levels))
    return out


def parent_path(path: str) -> str:
    """The object path a field hangs from ('' for the body); an array item field's parent is its array's
    item (``a.b[].c`` → ``a.b[]``), and an array's item path's is the array's parent."""
    if "\\" not in path:
        return path[: max(0, path.rfind("."))]
    last = 0
    i, n = 0, len(path)
    while i < n:
        c = path[i]
        if c == "\\":
            i += 2
            continue
        if c == ".":
            last = i
        i += 1
    return path[:last]


def _storable(key: str) -> bool:
    """Whether a key can be stored as text (``control.records.storable``: no NUL, no lone surrogate)."""
    return text_problem(key) is None


def is_id_like(path: str) -> bool:
    """A field named like an identifier (``id``, ``customer_id``, ``customerId``, ``uuid``, ``email``, or a
    reference such as ``customer``; only string and integer values count)."""
    last = path.rsplit(".", 1)[-1]
    return "[]" not in path and bool(_ID_NAME.search(last))


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """What one signature means for learning, computed once per signature."""

    present: tuple[tuple[str, frozenset[str]], ...]
    """Every path the body has, with the types it has there (items' paths: in any item)."""
    pairs: frozenset[tuple[str, frozenset[str]]]
    """``present`` as a set (what several shapes of a batch have in common is found in C)."""
    objects: frozenset[str]
    """Paths holding an object ('' is the body) whose every key was recorded: a known child missing under one
    of them is absent. An object cut by ``MAX_PATHS`` or ``MAX_DEPTH`` is not here."""
    cut: frozenset[str]
    """Paths present under an object that is not in ``objects`` (cut by ``MAX_PATHS``): seen, so present, but
    their siblings' absence there is not known."""
    partial: frozenset[str]
    """Item paths that some object items of their array have and others lack (so: optional)."""
    ids: tuple[str, ...]
    """Paths of the id-like scalar fields outside arrays: their values feed correlations."""
    id_values: Callable[[Any], tuple[Any, ...]] | None
    """The body's values at ``ids``, in that order (one compiled function); None when there are none."""
    id_keys: tuple[tuple[str, ...], ...]
    """The key path from the body to each of ``ids`` (``control.schemas.typed`` reads them from Structs)."""
    signature: Any
    """The signature it was compiled from."""


_ONE = {name: frozenset([name]) for name in _NAMES.values()}
_id_names: BytesLRU[str, bool] = BytesLRU(16 * 1024 * 1024, size=lambda _: 0)
"""Key name → whether it is id-like: weighed by the key's text, a sender's to choose (once 100,000 of any size)."""


def _id_name(key: str) -> bool:
    """``is_id_like`` of a key (remembered: real payloads repeat their key names across shapes)."""
    found = _id_names.get(key)
    if found is None:
        found = bool(_ID_NAME.search(key))
        _id_names.put(key, found)
    return found


class _Compiler:
    def __init__(self) -> None:
        self.types: dict[str, frozenset[str]] = {}
        self.objects: set[str] = set()
        self.incomplete: set[str] = set()
        """Objects (or array items) with a key that was not recorded: past ``MAX_PATHS``."""
        self.partial: set[str] = set()
        self.ids: list[str] = []

    def add(self, path: str, type_name: str) -> bool:
        seen = self.types.get(path)
        if seen is None:
            if len(self.types) >= MAX_PATHS:
                return False
            self.types[path] = _ONE[type_name]
        elif type_name not in seen:
            self.types[path] = seen | _ONE[type_name]
        return True

    def walk(self, sig: Any, path: str, key: str | None, depth: int = 0) -> bool:
        """Records ``path`` and what is under it; whether ``path`` itself was recorded. ``key``: its key when
        no array lies between it and the body (an id-like field's value can be read there), else None."""
        if not isinstance(sig, tuple):
            name = _NAMES["a" if sig == _EMPTY_ARRAY else sig]
            if not self.add(path, name):
                return False
            if key is not None and (name == "string" or name == "integer") and _id_name(key):
                self.ids.append(path)
            return True
        if sig[0] == "[":
            if not self.add(path, "array"):
                return False
            if depth < MAX_DEPTH:
                self.items(sig[1], path + "[]", depth + 1)
            return True
        if path and not self.add(path, "object"):
            return False
        if depth >= MAX_DEPTH:  # typed, not opened: not in ``objects``, so none of its keys counts as absent
            return True
        complete = True
        top = key is not None or not path
        prefix = path + "." if path else ""
        for k, child in zip(sig[0], sig[1], strict=True):
            if not _storable(k):
                continue
            child_path = prefix + k if ("." not in k and "\\" not in k and "[" not in k) else join_key(path, k)
            if not path and type(child) is tuple and self.reuse(child_path, k, child):
                continue
            if not self.walk(child, child_path, k if top else None, depth + 1):
                complete = False
        (self.objects if complete else self.incomplete).add(path)
        return True

    def reuse(self, path: str, key: str, sig: Any) -> bool:
        """Records a top-level object or array from the compiled fragment of its signature there, when it fits
        whole; whether it did (else it is walked)."""
        fragment = _fragment(path, key, sig)
        if fragment is None or len(self.types) + len(fragment.types) > MAX_PATHS:
            return False
        self.types.update(fragment.types)
        self.objects.update(fragment.objects)
        self.incomplete.update(fragment.incomplete)
        self.partial.update(fragment.partial)
        self.ids.extend(fragment.ids)
        return True

    def items(self, sigs: frozenset[Any], path: str, depth: int) -> None:
        objects = [s for s in sigs if isinstance(s, tuple) and s[0] != "["]
        for s in sigs:
            self.walk(s, path, None, depth)
        if len(objects) > 1:
            child_sets = [{join_key(path, k) for k in s[0] if _storable(k)} for s in objects]
            self.partial.update(set[str]().union(*child_sets) - set[str].intersection(*child_sets))


_COMPILER_BYTES = 1024
"""A compiled fragment's bytes beside its paths (its object, dict and four sets): 216 per empty set measured."""
_fragments: BytesLRU[tuple[str, Any], _Compiler] = BytesLRU(
    64 * 1024 * 1024, size=lambda c: _COMPILER_BYTES + sum(_PATH_BYTES + 2 * len(path) for path in c.types)
)
"""(path, signature) → compiled fragment, bounded in bytes (once by 500,000 paths: a fragment of one path
costs more than a kilobyte, and a hostile sender's every top-level field can be a fragment of its own)."""


def _fragment(path: str, key: str, sig: Any) -> _Compiler | None:
    """A top-level field's compiled subtree, by its path and signature (remembered: shapes of one event type
    differ in a few leaves, and share ``repository``, ``sender`` and the like whole); None when it alone
    reaches ``MAX_PATHS`` (then it is walked in place, where it is cut)."""
    found = _fragments.get((path, sig))
    if found is None:
        found = _Compiler()
        found.walk(sig, path, key, 1)
        if len(found.types) >= MAX_PATHS:
            return None
        _fragments.put((path, sig), found)
    return found


_GETTER_BYTES = 2048
"""A compiled getter's function and code object, beside its source's text (held in its constants)."""
_getters: BytesLRU[tuple[tuple[str, ...], ...], tuple[Callable[[Any], tuple[Any, ...]], int]] = BytesLRU(
    16 * 1024 * 1024, size=operator.itemgetter(1)
)
"""Key paths → (getter, weight), bounded in bytes: the keys are a sender's (once 2,000 of any size)."""


def _id_values(paths: tuple[tuple[str, ...], ...]) -> Callable[[Any], tuple[Any, ...]] | None:
    """``lambda d: (d["id"], d["data"]["object"]["id"])``, compiled once per set of key paths (shapes of one
    event type share theirs): one call per event. The keys go in as ``repr`` literals, so no key can be
    anything but a string constant."""
    if not paths:
        return None
    found = _getters.get(paths)
    if found is None:
        items = ", ".join("d" + "".join(f"[{key!r}]" for key in keys) for keys in paths)
        found = (eval(f"lambda d: ({items},)", {"__builtins__": {}}), _GETTER_BYTES + 4 * len(items))  # noqa: S307
        _getters.put(paths, found)
    return found[0]


def _keys(path: str) -> tuple[str, ...]:
    return tuple(key for key, _ in split_path(path))


def compile_shape(sig: Any) -> Shape:
    c = _Compiler()
    if isinstance(sig, tuple) and sig[0] != "[":
        c.walk(sig, "", None)
    # An item path walked once completely and once cut (two item shapes) is cut.
    incomplete = c.incomplete
    id_keys = tuple(_keys(p) for p in c.ids)
    return Shape(
        present=tuple(c.types.items()),
        pairs=frozenset(c.types.items()),
        objects=frozenset(c.objects - incomplete),
        cut=frozenset(p for p in c.types if not p.endswith("[]") and parent_path(p) in incomplete)
        if incomplete
        else frozenset(),
        partial=frozenset(c.partial),
        ids=tuple(c.ids),
        id_values=_id_values(id_keys),
        id_keys=id_keys,
        signature=sig,
    )


class Shapes:
    """The signature → Shape cache of one worker process (shared by its flush lanes), bounded in bytes: when
    full, the least recently used shapes go, one at a time, so a sender's steady shapes stay while another's
    flood of new ones passes through (it once emptied all at once, and every sender compiled again)."""

    def __init__(self) -> None:
        self._cache: BytesLRU[Any, Shape] = BytesLRU(_MAX_CACHED_BYTES, size=_shape_bytes)
        """A shape weighs its paths (a path's key names are the sender's, so their length counts), and its
        signature again as the key: on the safe side."""

    @property
    def nbytes(self) -> int:
        """What the cached shapes weigh."""
        return self._cache.nbytes

    def of(self, doc: dict[str, Any]) -> Shape:
        sig = signature(doc)
        shape = self._cache.get(sig)
        if shape is None:
            shape = compile_shape(sig)
            self._cache.put(sig, shape)
        return shape


def _shape_bytes(shape: Shape) -> int:
    return sum(_PATH_BYTES + 2 * len(path) for path, _ in shape.present)
