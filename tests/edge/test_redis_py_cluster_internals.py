"""The parts of redis-py's cluster client that are not its command API, yet ``edge/cluster.py`` (and the
edge's config listener, ``edge/config.py``) route by: ``RedisCluster.nodes_manager`` and its
``get_node_from_slot``, ``move_slot`` and ``initialize``, ``MovedError``/``AskError`` parsed from a reply's
text, and ``redis.crc.key_slot``. redis-py may change these in any release without a deprecation, so
pyproject.toml pins it below the next major, and this module checks each one against the installed
redis-py on the session's real Redis Cluster: an upgrade that changes one fails here, naming it, instead of
as lost routing under a resharding.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import redis
from packaging.requirements import Requirement
from redis import crc, exceptions
from redis.asyncio import cluster as asyncio_cluster

from bench.redis_cluster import ClusterNodes
from shared import redis_client

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
REDIS_PY = f"redis-py {redis.__version__}"


def _needs(owner: object, name: str, why: str, *, coroutine: bool | None = None) -> Any:
    """``owner.name``, or a failure naming it and what of hookyard relies on it."""
    where = owner.__name__ if inspect.ismodule(owner) else type(owner).__qualname__
    assert hasattr(owner, name), f"{REDIS_PY}: {where}.{name} is gone; {why}"
    value = getattr(owner, name)
    if coroutine is not None:
        assert inspect.iscoroutinefunction(value) is coroutine, (
            f"{REDIS_PY}: {where}.{name} is {'no longer' if coroutine else 'now'} a coroutine function; {why}"
        )
    return value


def test_redis_py_is_pinned_below_the_next_major() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (requirement,) = [r for r in map(Requirement, pyproject["project"]["dependencies"]) if r.name == "redis"]
    assert not requirement.specifier.contains("9.0.0", prereleases=True), (
        f"pyproject.toml lets redis-py 9 in ({requirement}): edge/cluster.py relies on its cluster internals"
    )
    assert requirement.specifier.contains(version("redis")), (
        f"the installed redis-py {version('redis')} is outside pyproject.toml's {requirement}: "
        "this module checks the internals of a version hookyard does not install"
    )


async def test_the_cluster_internals_the_edge_routes_by(redis_cluster: ClusterNodes) -> None:
    _needs(asyncio_cluster, "RedisCluster", "shared/redis_client.py opens it for a cluster")
    key_slot = _needs(crc, "key_slot", "edge/cluster.py and shared/keys.py compute slots with it")
    moved_error = _needs(exceptions, "MovedError", "edge/cluster.py parses a MOVED reply with it")
    ask_error = _needs(exceptions, "AskError", "edge/cluster.py parses an ASK reply with it")

    key = "hy:{ingest:1}"
    slot = key_slot(key.encode())
    assert slot == int(redis_cluster.call(redis_cluster.ports[0], "cluster", "keyslot", key)), (
        f"{REDIS_PY}: redis.crc.key_slot disagrees with CLUSTER KEYSLOT"
    )
    owner = redis_cluster.owner(slot)
    other = next(p for p in redis_cluster.ports if p != owner)

    moved = moved_error(f"{slot} 127.0.0.1:{other}")  # the text of "-MOVED slot host:port" after "MOVED "
    assert (moved.slot_id, moved.host, moved.port) == (slot, "127.0.0.1", other), (
        f"{REDIS_PY}: MovedError no longer parses 'slot host:port' into slot_id, host, port"
    )
    ask = ask_error(f"{slot} 127.0.0.1:{other}")
    assert (ask.host, int(ask.port)) == ("127.0.0.1", other), (
        f"{REDIS_PY}: AskError no longer parses 'slot host:port' into host, port"
    )

    client = redis_client.connect(redis_cluster.url, cluster=True)  # as edge.app opens it
    try:
        _needs(client, "initialize", "edge.app loads the slot map with it before routing", coroutine=True)
        await client.initialize()
        nodes = _needs(client, "nodes_manager", "edge/cluster.py reads the slot map from it")
        get_node_from_slot = _needs(nodes, "get_node_from_slot", "edge/cluster.py finds a key's master with it")
        why = "edge/cluster.py awaits it to patch the map on MOVED"
        move_slot = _needs(nodes, "move_slot", why, coroutine=True)
        why = "edge/cluster.py awaits it to reload the map after a node failed"
        initialize = _needs(nodes, "initialize", why, coroutine=True)

        def master() -> tuple[str, int]:
            node = get_node_from_slot(slot)
            return node.host, node.port

        assert master() == ("127.0.0.1", owner), f"{REDIS_PY}: get_node_from_slot does not name the slot's master"
        await move_slot(moved)
        assert master() == ("127.0.0.1", other), f"{REDIS_PY}: move_slot(MovedError) no longer moves the slot"
        await initialize()  # the map was patched wrongly on purpose: the reload must ask the cluster again
        assert master() == ("127.0.0.1", owner), f"{REDIS_PY}: nodes_manager.initialize() does not reload the map"
    finally:
        await client.aclose()
