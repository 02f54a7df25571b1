"""BytesLRU: bounded by bytes, least recently used out first, an entry heavier than the bound never kept."""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.bytes_lru import ENTRY_OVERHEAD, BytesLRU, key_weight, memoize


def test_keeps_and_returns_values() -> None:
    cache: BytesLRU[str, str] = BytesLRU(10_000)
    assert cache.put("a", "alpha")
    assert cache.get("a") == "alpha"
    assert cache.get("b") is None
    assert cache.get("b", 7) == 7
    assert "a" in cache
    assert len(cache) == 1


def test_weight_counts_key_value_and_overhead() -> None:
    cache: BytesLRU[str, bytes] = BytesLRU(10_000)
    cache.put("k", b"x" * 100)
    assert cache.nbytes == ENTRY_OVERHEAD + sys.getsizeof("k") + sys.getsizeof(b"x" * 100)


def test_least_recently_used_leaves_first() -> None:
    one = ENTRY_OVERHEAD + key_weight("a") + sys.getsizeof("v" * 1000)
    cache: BytesLRU[str, str] = BytesLRU(one * 3)
    for key in "abc":
        cache.put(key, "v" * 1000)
    cache.get("a")  # a is now the most recent: b is the oldest
    cache.put("d", "v" * 1000)
    assert "b" not in cache
    assert all(key in cache for key in "acd")
    assert cache.nbytes <= cache.max_bytes


def test_an_entry_heavier_than_the_bound_is_not_kept() -> None:
    cache: BytesLRU[str, str] = BytesLRU(4096)
    cache.put("small", "s")
    assert not cache.put("huge", "x" * 5000)
    assert "huge" not in cache
    assert "small" in cache  # a refused entry pushes nothing out


def test_a_too_heavy_replacement_drops_the_stale_entry() -> None:
    cache: BytesLRU[str, str] = BytesLRU(4096)
    cache.put("k", "old")
    assert not cache.put("k", "x" * 5000)
    assert cache.get("k") is None
    assert cache.nbytes == 0


def test_max_entry_bounds_one_entry_below_the_total() -> None:
    cache: BytesLRU[str, str] = BytesLRU(100_000, max_entry=2_000)
    assert cache.put("a", "x" * 1000)
    assert not cache.put("b", "x" * 3000)


def test_replacing_a_key_reweighs_it() -> None:
    cache: BytesLRU[str, str] = BytesLRU(100_000)
    cache.put("k", "x" * 5000)
    cache.put("k", "y")
    assert cache.nbytes == ENTRY_OVERHEAD + key_weight("k") + sys.getsizeof("y")
    assert len(cache) == 1


def test_pop_and_clear_release_weight() -> None:
    cache: BytesLRU[str, str] = BytesLRU(100_000)
    cache.put("a", "1")
    cache.put("b", "2")
    assert cache.pop("a") == "1"
    assert cache.pop("a", "gone") == "gone"
    assert cache.nbytes == ENTRY_OVERHEAD + key_weight("b") + sys.getsizeof("2")
    cache.clear()
    assert cache.nbytes == 0
    assert len(cache) == 0


def test_size_function_weighs_other_values() -> None:
    cache: BytesLRU[str, list[int]] = BytesLRU(10_000, size=lambda v: 8 * len(v))
    cache.put("a", [1, 2, 3])
    assert cache.nbytes == ENTRY_OVERHEAD + key_weight("a") + 24
    assert not cache.put("b", list(range(2000)))


def test_other_values_without_a_size_function_are_refused() -> None:
    cache: BytesLRU[str, object] = BytesLRU(10_000)
    with pytest.raises(TypeError, match="list"):
        cache.put("a", [1])


def test_heavy_keys_count() -> None:
    cache: BytesLRU[tuple[str, str], str] = BytesLRU(10_000)
    assert not cache.put(("x" * 20_000, "y"), "v")
    assert key_weight(("ab", b"cd")) > key_weight("ab") + key_weight(b"cd")


def test_many_tiny_entries_are_bounded_by_the_overhead() -> None:
    cache: BytesLRU[int, str] = BytesLRU(64 * 1024)
    for i in range(100_000):
        cache.put(i, "")
    assert cache.nbytes <= 64 * 1024
    assert len(cache) < 64 * 1024 // ENTRY_OVERHEAD


def test_rejects_a_non_positive_bound() -> None:
    with pytest.raises(ValueError, match="positive"):
        BytesLRU(0)


@given(
    st.lists(
        st.tuples(st.sampled_from(["get", "put", "pop"]), st.integers(0, 20), st.integers(0, 3000)),
        max_size=200,
    )
)
def test_weight_never_passes_the_bound_and_matches_the_entries(ops: list[tuple[str, int, int]]) -> None:
    cache: BytesLRU[int, str] = BytesLRU(8000)
    model: dict[int, str] = {}
    for op, key, length in ops:
        if op == "put":
            if cache.put(key, "z" * length):
                model[key] = "z" * length
            else:
                model.pop(key, None)
        elif op == "pop":
            cache.pop(key)
            model.pop(key, None)
        else:
            found = cache.get(key)
            assert found is None or found == model.get(key)
        assert cache.nbytes <= 8000
        kept = {k: v for k, v in model.items() if k in cache}
        assert cache.nbytes == sum(cache.weigh(k, v) for k, v in kept.items())


def test_memoize_caches_by_arguments_and_not_errors() -> None:
    calls: list[tuple[str, int]] = []

    @memoize(10_000)
    def render(name: str, count: int) -> str:
        calls.append((name, count))
        if count < 0:
            raise ValueError("negative")
        return name * count

    assert render("ab", 2) == "abab"
    assert render("ab", 2) == "abab"
    assert calls == [("ab", 2)]
    for _ in range(2):
        with pytest.raises(ValueError, match="negative"):
            render("ab", -1)
    assert calls.count(("ab", -1)) == 2
    render("x", 50_000)  # too heavy to keep: computed each time
    render("x", 50_000)
    assert calls.count(("x", 50_000)) == 2
    render.cache_clear()  # type: ignore[attr-defined]
    render("ab", 2)
    assert calls.count(("ab", 2)) == 2


def test_concurrent_puts_keep_the_weight_consistent() -> None:
    cache: BytesLRU[int, str] = BytesLRU(50_000)

    def fill(offset: int) -> None:
        for i in range(2000):
            cache.put(offset + i % 300, "q" * (i % 700))

    threads = [threading.Thread(target=fill, args=(n * 1000,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.nbytes <= 50_000
    assert cache.nbytes == sum(cache.weigh(k, v) for k, (v, _) in cache._entries.items())
