"""Caches a tenant fills are bounded in bytes (issue 42): filled by a hostile account with the largest values
it may write, each holds at most its budget, and an entry heavier than a cache's bound is not kept. Before,
they were bounded by entry count (4,096 entries of any size: 40 dry runs returning a 3 MB path grew the
control process by 230 MB)."""

from __future__ import annotations

import msgspec
import pytest

from control.delivery import send
from control.routing import route
from control.routing.conditions import compilation, validation
from control.routing.route import Router
from control.schemas import shape
from control.schemas.shape import Shapes
from shared.bytes_lru import BytesLRU
from shared.signatures import identity, mac


def _big_tree(n: int) -> dict:
    """A valid tree near the 64 KiB cap: 200 leaves of long distinct values."""
    return {
        "op": "OR",
        "children": [
            {"field": f"body.f{i}", "operator": "equals", "value": f"{n}-{i}-" + "v" * 250} for i in range(200)
        ],
    }


def test_compiled_condition_trees_stay_within_their_budget() -> None:
    cache = compilation._COMPILED
    assert isinstance(cache, BytesLRU)
    for n in range(400):  # 400 distinct ~55 KB trees: 700 MB at the weight of 32 bytes per JSON byte
        compilation.compile_tree(_big_tree(n))
        assert cache.nbytes <= cache.max_bytes
    assert len(cache) < 400


def test_regex_cache_is_weighed() -> None:
    for n in range(1000):
        validation.regex(f"(a|b){{1,{n % 900 + 1}}}c{n}")
    assert validation.regex.cache.nbytes <= validation.regex.cache.max_bytes  # type: ignore[attr-defined]  # memoize's wrapper carries .cache


def test_a_long_url_is_parsed_but_never_kept() -> None:
    """A transform may make every URL different and as long as a URL may be (64 KB): parsed each time."""
    before = send._url.cache.nbytes  # type: ignore[attr-defined]  # memoize's wrapper carries .cache
    for n in range(100):
        _, target, *_ = send._url(f"https://example.com/{n}/" + "p" * 60_000)
        assert len(target) > 60_000
    assert send._url.cache.nbytes == before  # type: ignore[attr-defined]  # memoize's wrapper carries .cache
    for n in range(1000):  # 60 MB of URLs
        send._url(f"https://example.com/{n}/" + "q" * 30_000)  # under the entry bound: kept, within the budget
    assert send._url.cache.nbytes <= send._url.cache.max_bytes  # type: ignore[attr-defined]  # memoize's wrapper carries .cache
    assert send._url("https://example.com/a")[0] == "example.com"
    assert ("https://example.com/a",) in send._url.cache  # type: ignore[attr-defined]  # memoize's wrapper carries .cache


def test_secret_keyed_caches_are_bounded_by_their_keys_too() -> None:
    for n in range(2000):
        secret = f"whsec_{n}" + "s" * 20_000  # an endpoint's secret is the caller's text
        mac.plain_mac(secret)
        identity.identity_mac(secret)
    for cache in (mac.plain_mac.cache, identity.identity_mac.cache):  # type: ignore[attr-defined]  # memoize's wrapper carries .cache
        assert cache.nbytes <= cache.max_bytes
        assert len(cache) < 2000


def test_the_routers_caches_weigh_the_trees_they_hold(ctx) -> None:
    """A worker keeps every endpoint's compiled rules: weighed by their trees, so a hostile account's 64 KiB
    trees push others' out by bytes, never past the budget (before: 100,000 endpoints, 10,000 rules)."""
    router = Router(ctx)
    tree = _big_tree(0)
    size = len(msgspec.json.encode(tree))
    for n in range(100):
        big = _big_tree(n)
        predicate = router._predicate(f"rule_{n}", big)
        rules = route._endpoint_rules("production", [(route._Rule(f"rule_{n}", predicate, ("dst_1",)), big)], 1, (), {})
        assert rules.weight >= route._PER_TREE_BYTE * size
        router._cache.put(f"ep_{n}", rules)
        assert router._cache.nbytes <= router._cache.max_bytes
        assert router._compiled.nbytes <= router._compiled.max_bytes
    assert len(router._cache) < 100
    assert len(router._compiled) < 100
    assert router._predicate("rule_99", _big_tree(99)) is router._compiled.get("rule_99")[1]


def test_the_learners_shapes_are_bounded_by_their_key_names_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sender's every body a new 1,900-key shape with long key names: weighed by the names' length. The
    budget is cut to 20 MB here (128 MB in service): compiling 25 such shapes to pass the real one cost the
    suite 24 s of CPU, and the weighing is the same at any budget."""
    monkeypatch.setattr(shape, "_MAX_CACHED_BYTES", 20 * 1024 * 1024)
    shapes = Shapes()
    for n in range(5):  # 1,900 paths of 2 KB each: 7.8 MB a shape at the weight, 5 of them past 20 MB
        shapes.of({f"k{n}-{i}-" + "x" * 2000: i for i in range(1900)})
        assert shapes.nbytes <= shape._MAX_CACHED_BYTES
    assert len(shapes._cache) < 5


def test_a_sandbox_process_keeps_a_bounded_count_of_header_names() -> None:
    """The header names a sandbox process found valid (``control.transform.apply``): a transform returning a
    new name of 256 characters on every call fills at most 1,024 of them (under 1 MB); a name refused is
    refused every time, never kept."""
    from control.transform import apply

    for i in range(3_000):
        name = f"x-{i:06d}-" + "a" * 246
        assert apply._header_name(name) == name
        assert len(apply._NAMES) <= apply._NAMES_KEPT
    assert sum(len(name) + len(lower) for name, lower in apply._NAMES.items()) < 1024 * 1024
    for refused in ("bad name", "Connection", "x" * 257):
        for _ in range(2):
            with pytest.raises(apply._Wrong):
                apply._header_name(refused)
        assert refused not in apply._NAMES
