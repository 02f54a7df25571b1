"""The session's Redis Cluster for the tests: ``bench.redis_cluster`` started once per session, shut down
after (the cluster code is in bench/ so that ``python -m bench`` runs without pytest).

``redis_cluster`` yields the running ``ClusterNodes``; a test module opts into it by overriding the
``redis_url`` fixture (``tests/e2e/test_redis_cluster.py``), so the same tests run against one Redis and
against a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from bench.redis_cluster import ClusterNodes, redis_server_7, running_cluster

__all__ = ("redis_cluster",)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[ClusterNodes]:
    binaries = redis_server_7()
    if binaries is None:
        message = "no redis-server 7 or later on this machine for a Redis Cluster (apt-get install -y redis-server)"
        if os.environ.get("CI") == "true":  # CI's machine has one: a skip there would hide the cluster tests
            pytest.fail(message)
        pytest.skip(message)
    with running_cluster(*binaries, prefix="hookyard-cluster-") as nodes:
        yield nodes
