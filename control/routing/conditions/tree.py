"""What a condition tree is made of and what it runs on: the operators, the meta keys, the missing value, the
event view, and the error a tree that is not valid raises.

Apart from validation and compilation because both speak this vocabulary, and so do the flush's routing
(``control.routing.route`` builds an :class:`EventView` per event and reads :data:`META_KEYS`) and label
rules (``control.routing.labels`` reads fields as :data:`MISSING` or a value): one definition each, which
neither side owns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from control.records.fields import LABEL_PREFIX, META_KEYS
from shared.errors import InvalidConditionTree

__all__ = (
    "LABEL_PREFIX",
    "META_KEYS",
    "MISSING",
    "OPERATORS",
    "EventView",
    "InvalidConditionTree",
    "Predicate",
)

OPERATORS: Final = ("equals", "not_equals", "contains", "exists", "regex")


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
