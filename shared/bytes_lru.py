"""A least-recently-used cache bounded by what its entries weigh in bytes, never by how many there are.

Caches a tenant can fill (compiled conditions, prepared signers, transformed URLs...) were bounded by entry
count: 4,096 entries of any size let one account's 3 MB values hold gigabytes. Here every entry is weighed
(its key and its value, plus a fixed overhead so that a flood of tiny entries is bounded too), the total
never passes ``max_bytes``, and an entry heavier than the whole bound (or than ``max_entry`` when given) is
simply not kept: the caller recomputes it next time, which is the cost a cache miss always had.

Values are weighed by the caller's ``size`` function, or, without one, must be ``bytes``/``str`` (weighed
by ``sys.getsizeof``): a value of another type without a size function is refused with ``TypeError`` rather
than guessed. Keys are weighed structurally (strings and bytes by their size, tuples by their parts). A lock
makes each change atomic (a lookup needs none), since some callers run in threads (signature checks, TLS contexts).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ("ENTRY_OVERHEAD", "BytesLRU", "key_weight", "memoize")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")

ENTRY_OVERHEAD = 128
"""What an entry costs beyond its key and value (the ordered dict's node, the weight kept beside it)."""

_MISSING: Any = object()


def key_weight(key: object) -> int:
    """Bytes a key holds: text and bytes by their size, tuples and frozensets by their parts."""
    if isinstance(key, str | bytes | bytearray | memoryview):
        return sys.getsizeof(key)
    if isinstance(key, tuple | frozenset):
        return sys.getsizeof(key) + sum(key_weight(part) for part in key)
    return sys.getsizeof(key)


def _text_weight(value: object) -> int:
    if isinstance(value, str | bytes | bytearray | memoryview):
        return sys.getsizeof(value)
    raise TypeError(f"BytesLRU without a size function keeps bytes or str, not {type(value).__name__}")


class BytesLRU(Generic[K, V]):
    """Maps keys to values, dropping the least recently used once the weights pass ``max_bytes``."""

    __slots__ = ("_entries", "_lock", "_size", "max_bytes", "max_entry", "nbytes")

    def __init__(self, max_bytes: int, size: Callable[[V], int] | None = None, *, max_entry: int | None = None) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes
        self.max_entry = max_bytes if max_entry is None else min(max_entry, max_bytes)
        self._size: Callable[[Any], int] = size if size is not None else _text_weight
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0

    def weigh(self, key: K, value: V) -> int:
        """What ``key`` and ``value`` would cost here."""
        return ENTRY_OVERHEAD + key_weight(key) + int(self._size(value))

    def get(self, key: K, default: Any = None) -> V | Any:
        # Without the lock: a hit is on the edge's hot path (a MAC per request), and each OrderedDict
        # call is atomic on its own; an entry evicted between the two calls is still a correct answer.
        found = self._entries.get(key, _MISSING)
        if found is _MISSING:
            return default
        try:  # noqa: SIM105 - a try is cheaper than contextlib.suppress on the hot path
            self._entries.move_to_end(key)
        except KeyError:
            pass
        return found[0]

    def put(self, key: K, value: V) -> bool:
        """Keep ``value`` under ``key``; False (and any older entry under ``key`` dropped) when too heavy."""
        weight = self.weigh(key, value)
        with self._lock:
            old = self._entries.pop(key, _MISSING)
            if old is not _MISSING:
                self.nbytes -= old[1]
            if weight > self.max_entry:
                return False
            self._entries[key] = (value, weight)
            self.nbytes += weight
            while self.nbytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.nbytes -= dropped
            return True

    def pop(self, key: K, default: Any = None) -> V | Any:
        with self._lock:
            old = self._entries.pop(key, _MISSING)
            if old is _MISSING:
                return default
            self.nbytes -= old[1]
            return old[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.nbytes = 0

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


def memoize(
    max_bytes: int, size: Callable[[Any], int] | None = None, *, max_entry: int | None = None
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """``functools.lru_cache`` bounded in bytes: positional hashable arguments are the key.

    Exceptions are not cached (each call raises anew). The wrapper has ``cache`` (the BytesLRU) and
    ``cache_clear``, as lru_cache's has, so tests and callers can empty it.
    """

    def decorate(function: Callable[..., R]) -> Callable[..., R]:
        cache: BytesLRU[tuple[Any, ...], R] = BytesLRU(max_bytes, size, max_entry=max_entry)
        get = cache.get

        @functools.wraps(function)
        def wrapper(*args: Any) -> R:
            found = get(args, _MISSING)
            if found is not _MISSING:
                return found
            value = function(*args)
            cache.put(args, value)
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]  # a function object takes attributes, as lru_cache's
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]  # idem
        return wrapper

    return decorate
