"""Stable traffic decoded straight into its known shape: a msgspec Struct per repeated signature.

Decoding a body into dicts and walking it into a signature (``control.schemas.shape``) is most of learning's
cost per event, and most senders repeat one shape per event type. So once a sender (endpoint, provider,
event type) has shown the same signature twice in a row, the learner builds a Struct type that accepts that
signature and nothing else (every key required, no other key, each value of its observed JSON type) and
tries it first on that sender's next bodies. msgspec checks the shape in C while it decodes, into Structs
that the garbage collector does not track; a body it accepts has the Struct's Shape, known without a walk.
A body it refuses (``msgspec.ValidationError``) takes the general path, whose shape becomes the candidate.

A Struct accepts a body exactly when the body's signature is the one it was built from, except where the
difference cannot change what is learned:

- key order is not checked: a Shape does not depend on it (the same paths);
- an integer is accepted where a number was seen: the path is then typed ``number`` for that sample, which
  is what merging ``integer`` and ``number`` gives anyway (``control.schemas.state``);
- every item of an array is checked, not only the first ``MAX_ITEMS``: a body that differs further on is
  refused, and the general path learns it as before.

Signatures a Struct cannot state (an array whose items have several signatures, a key holding a backslash,
a quote or a control character) get no Struct.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Annotated, Any

import msgspec

from control.schemas.shape import Shape

__all__ = ("Typed", "shape_weight", "typed")

_SCALARS: dict[str, Any] = {"s": str, "i": int, "n": float, "b": bool, "z": None}
_EMPTY = Annotated[list[Any], msgspec.Meta(max_length=0)]
_SHAPE_PATH_BYTES = 320
"""A Shape's bytes per path beside twice its text: 169 to 296 measured (tracemalloc, 10 to 1,800 paths,
flat and nested, keys of 5 to 100 characters), rounded up."""
_STRUCT_PATH_BYTES = 448
"""A Struct decoder's bytes per field beside twice its key's text: 366 to 578 measured alike."""
_STRUCT_CLASS_BYTES = 2048
"""A Struct class per object of the signature (``msgspec.defstruct``): about 1,900 measured."""


class _Unstated(Exception):
    """The signature has a part no Struct field type can state exactly."""


class Typed:
    """A Struct decoder for one Shape, and the getter of its id-like values from what it decodes."""

    __slots__ = ("decode", "id_getters", "id_values", "shape", "weight")

    def __init__(self, shape: Shape, decode: Callable[[bytes], Any], id_getters: tuple[Callable[[Any], Any], ...]):
        self.shape = shape
        self.weight = _typed_weight(shape)
        """What it holds in bytes, its Shape included (caches of it are bounded in bytes: issue 42)."""
        self.decode = decode
        self.id_getters = id_getters
        """One getter per ``shape.ids`` path (``operator.attrgetter``: the whole path in one C call)."""
        self.id_values = (lambda d: tuple(get(d) for get in id_getters)) if id_getters else None
        """The values at ``shape.ids`` of one Struct, as ``Shape.id_values`` gives them of a dict."""


def shape_weight(shape: Shape) -> int:
    """What a Shape holds in bytes, estimated from its paths: a cache holding it may be all that keeps it."""
    return sum(_SHAPE_PATH_BYTES + 2 * len(path) for path, _ in shape.present)


def _typed_weight(shape: Shape) -> int:
    """A Struct decoder's bytes with its Shape's: a class per object (the body's included), a field per path."""
    objects = 1 + sum("object" in kinds for _, kinds in shape.present)
    fields = sum(_STRUCT_PATH_BYTES + 2 * len(path) for path, _ in shape.present)
    return shape_weight(shape) + _STRUCT_CLASS_BYTES * objects + fields


def _field_type(sig: Any) -> Any:
    if isinstance(sig, str):
        if sig == "[]":
            return _EMPTY
        return _SCALARS[sig]
    if sig[0] == "[":
        if len(sig[1]) != 1:
            raise _Unstated
        (item,) = sig[1]
        return Annotated[list[_field_type(item)], msgspec.Meta(min_length=1)]  # type: ignore[misc]  # a type built at run time for msgspec
    keys, children = sig
    return msgspec.defstruct(
        "Body",
        [(f"f{i}", _field_type(child)) for i, child in enumerate(children)],
        rename={f"f{i}": key for i, key in enumerate(keys)},
        forbid_unknown_fields=True,
        gc=False,
    )


def _attributes(sig: Any, keys: tuple[str, ...]) -> str:
    """``("data", "object", "id")`` → ``f3.f0.f0``: the Struct fields holding that key path."""
    out = []
    for key in keys:
        index = sig[0].index(key)
        out.append(f"f{index}")
        sig = sig[1][index]
    return ".".join(out)


def typed(shape: Shape) -> Typed | None:
    """The Struct decoder of a Shape's signature; None for a signature no Struct states exactly."""
    sig = shape.signature
    if not isinstance(sig, tuple) or sig[0] == "[":
        return None
    try:
        decoder = msgspec.json.Decoder(_field_type(sig))
    except (_Unstated, RecursionError, ValueError):  # ValueError: a key msgspec cannot name (a backslash, a quote)
        return None
    return Typed(shape, decoder.decode, tuple(attrgetter(_attributes(sig, keys)) for keys in shape.id_keys))
