"""hookyard on a real three-master Redis Cluster (``tests/redis_cluster.py``): REDIS_URL names one node,
hookyard finds out itself, and capture, long-poll wakeups, routing and delivery work as on one Redis; a
resharding of an ingest slot in the middle of a load loses and duplicates nothing acknowledged.

The capture, wait, routing and delivery tests of their own modules run here again, unchanged,
with this module's ``redis_url`` (a cluster node) under every fixture.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from redis.crc import key_slot

from bench.redis_cluster import ClusterNodes, redis_server_7
from shared import redis_client
from shared.keys import Keys
from tests.conftest import make_account
from tests.delivery.conftest import settings  # noqa: F401 - the delivery room's fast settings, for its test here
from tests.delivery.test_deliver_e2e import test_end_to_end_edge_to_destination as test_delivery_on_a_cluster  # noqa: F401
from tests.e2e.conftest import new_endpoint, stored_events
from tests.e2e.test_capture_e2e import test_requests_are_captured_verbatim as test_capture_on_a_cluster  # noqa: F401
from tests.helpers import wait_for
from tests.stack import Stack
from tests.workers.conftest import flush  # noqa: F401 - the workers room's flush, for its test here
from tests.workers.test_routing_flush import (  # noqa: F401
    test_one_task_per_event_rule_and_destination_even_when_reprocessed as test_routing_on_a_cluster,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def redis_url(redis_cluster: ClusterNodes) -> str:
    return redis_cluster.url


@pytest.fixture(autouse=True)
def slots_put_back(redis_cluster: ClusterNodes) -> Iterator[None]:
    """The session's cluster is shared (and the order random): a slot a test moved to another master goes
    back, keys and all, so the next test meets the evenly split cluster ``redis-cli --cluster create`` made."""
    before = _owners(redis_cluster)
    yield
    for slot, owner in enumerate(_owners(redis_cluster)):
        if owner != before[slot]:
            _move_slot(redis_cluster, slot, before[slot])


def _owners(cluster: ClusterNodes) -> list[int]:
    """The port of the master serving each of the 16384 slots."""
    owners = [0] * 16384
    for line in cluster.call(cluster.ports[0], "cluster", "nodes").splitlines():
        fields = line.split()
        if "master" in fields[2]:
            port = int(fields[1].split(":")[1].split("@")[0])
            for span in fields[8:]:
                if not span.startswith("["):
                    low, _, high = span.partition("-")
                    owners[int(low) : int(high or low) + 1] = [port] * (int(high or low) + 1 - int(low))
    return owners


def _move_slot(cluster: ClusterNodes, slot: int, target: int, *, held_back: int | None = None) -> None:
    """``slot`` and its keys to the master at ``target``, the steps ``redis-cli --cluster reshard`` takes;
    the node at ``held_back`` is not told (the caller does it), so until then it still names the source.

    The IMPORTING step is not only for the keys: a SETSLOT NODE on a node importing the slot bumps its config
    epoch, without which a target of a lower epoch than the source takes back the source's claim from any
    gossip that reaches it before the source's own SETSLOT, and the two then send each other's clients MOVED
    for good (seen under load: no client could subscribe on the slot again)."""
    call, source = cluster.call, cluster.owner(slot)
    source_id, target_id = cluster.node_id(source), cluster.node_id(target)
    assert call(target, "cluster", "setslot", str(slot), "importing", source_id) == "OK"
    assert call(source, "cluster", "setslot", str(slot), "migrating", target_id) == "OK"
    while keys := call(source, "cluster", "getkeysinslot", str(slot), "100").split():
        for key in keys:
            assert call(source, "migrate", "127.0.0.1", str(target), key, "0", "5000") in ("OK", "NOKEY")
    for port in sorted(cluster.ports, key=lambda p: (p != target, p != source)):
        if port != held_back:
            assert call(port, "cluster", "setslot", str(slot), "node", target_id) == "OK"


async def test_hookyard_tells_a_cluster_from_one_redis(redis_cluster: ClusterNodes, servers) -> None:
    assert await redis_client.is_cluster(redis_cluster.url)
    for port in redis_cluster.ports:  # any node will do
        assert await redis_client.is_cluster(f"redis://127.0.0.1:{port}/0")
    assert not await redis_client.is_cluster(servers.redis_url)
    client = await redis_client.open_client(redis_cluster.url)
    try:
        assert redis_client.is_cluster_client(client)
    finally:
        await client.aclose()


@pytest.mark.parametrize("shards", [3, 4, 6, 12])
def test_each_shards_keys_share_a_slot_and_the_shards_spread_evenly_over_the_masters(
    redis_cluster: ClusterNodes, shards: int
) -> None:
    keys = Keys("hy:", shards=shards, cluster=True)
    for shard in range(shards):  # the MULTI of the flush's dead letters names both
        assert key_slot(keys.ingest_stream(shard).encode()) == key_slot(keys.dead_letter_stream(shard).encode())
    per_master = Counter(redis_cluster.owner(key_slot(stream.encode())) for stream in keys.ingest_streams())
    assert set(per_master) == set(redis_cluster.ports)
    assert max(per_master.values()) - min(per_master.values()) <= 1
    assert Keys("hy:", shards=shards).ingest_stream(1) == "hy:{ingest:1}"  # one Redis keeps its names


async def test_a_long_poll_is_woken_by_a_webhook_through_the_cluster(
    stack: Stack, database_url: str, redis_cluster: ClusterNodes
) -> None:
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush")
    account = await make_account(database_url)
    endpoint = new_endpoint(stack, account)
    async with httpx.AsyncClient(timeout=30) as client:
        wait = asyncio.create_task(
            client.get(
                f"{stack.control_url}/v1/endpoints/{endpoint['id']}/events/wait",
                params={"timeout": 20},
                headers=account.headers,
            )
        )
        channel = Keys(stack.env["HOOKYARD_REDIS_PREFIX"]).event_channel(endpoint["id"])
        deadline = time.monotonic() + 10
        while redis_cluster.call(redis_cluster.ports[0], "pubsub", "numsub", channel).split()[-1] == "0":
            assert time.monotonic() < deadline, "control never subscribed to the endpoint's wakeups"
            await asyncio.sleep(0.02)
        token = endpoint["ingest_url"].rsplit("/", 1)[-1]
        sent = await client.post(f"{stack.edge_url}/h/{token}", content=b"{}")
        assert sent.status_code == 200, sent.text
        woken = await asyncio.wait_for(wait, 25)
    assert woken.status_code == 200, woken.text
    assert woken.json()["event"]["id"] == sent.json()["id"]
    started = next(x for x in (stack.log_dir / "worker.log").read_text().splitlines() if "worker: running" in x)
    assert f"(a Redis Cluster of {len(redis_cluster.ports)} masters, " in started, started  # not one Redis's line


async def test_resharding_an_ingest_slot_during_load_loses_nothing(
    stack: Stack, database_url: str, redis_cluster: ClusterNodes
) -> None:
    """A ledger: every request sent is answered; every 2xx is stored exactly once; the slot of the busiest
    shard moves to another master (CLUSTER SETSLOT + MIGRATE, as ``redis-cli --cluster reshard`` does) while
    two senders keep writing, so the edge meets ASK and MOVED and the flush follows its stream."""
    stack.env["HOOKYARD_STREAM_SHARDS"] = "3"
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush")
    account = await make_account(database_url)
    endpoint = new_endpoint(stack, account)
    token = endpoint["ingest_url"].rsplit("/", 1)[-1]
    keys = Keys(stack.env["HOOKYARD_REDIS_PREFIX"], shards=3, cluster=True)
    stream = keys.ingest_stream(keys.shard_for(endpoint["id"]))
    slot = key_slot(stream.encode())
    source = redis_cluster.owner(slot)
    target = next(p for p in redis_cluster.ports if p != source)

    sent = 0
    acked: list[str] = []
    refused: list[int] = []
    moving = asyncio.Event()
    moved = asyncio.Event()

    async def sender(client: httpx.AsyncClient) -> None:
        nonlocal sent
        while not moved.is_set() or sent < 600:
            sent += 1
            response = await client.post(f"{stack.edge_url}/h/{token}", content=b'{"n":%d}' % sent)
            if response.status_code == 200:
                acked.append(response.json()["id"])
            else:
                refused.append(response.status_code)
            if sent == 150:
                moving.set()

    async def more_acknowledged(count: int) -> None:
        """Until ``count`` more requests were acknowledged: the senders wrote through the current step."""
        start = len(acked)
        await wait_for(lambda: asyncio.sleep(0, len(acked) >= start + count), timeout=20)

    async def reshard() -> None:
        await moving.wait()
        call = redis_cluster.call
        source_id, target_id = redis_cluster.node_id(source), redis_cluster.node_id(target)
        assert call(target, "cluster", "setslot", str(slot), "importing", source_id) == "OK"
        assert call(source, "cluster", "setslot", str(slot), "migrating", target_id) == "OK"
        await more_acknowledged(20)  # writes meanwhile still land on the source, which holds the key
        for key in call(source, "cluster", "getkeysinslot", str(slot), "100").split():
            reply = call(source, "migrate", "127.0.0.1", str(target), key, "0", "5000")
            assert reply in ("OK", "NOKEY"), reply
        await more_acknowledged(20)  # the key is on the target, the slot not yet: the edge meets ASK
        for port in sorted(redis_cluster.ports, key=lambda p: (p != target, p != source)):  # as redis-cli does
            assert call(port, "cluster", "setslot", str(slot), "node", target_id) == "OK"
        moved.set()

    async with httpx.AsyncClient(timeout=10) as client:
        await asyncio.gather(sender(client), sender(client), reshard())
    assert redis_cluster.owner(slot) == target

    stored = [e["id"] for e in stored_events(stack, account, endpoint["id"], len(acked), timeout_s=30)]
    assert sorted(stored) == sorted(acked), f"sent {sent}, acknowledged {len(acked)}, stored {len(stored)}"
    assert not refused, f"refused during the resharding: {refused}"
    deadline = time.monotonic() + 10
    while redis_cluster.call(target, "xlen", stream) not in ("0", "") and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert redis_cluster.call(target, "xlen", stream) == "0"  # the flush drained the moved stream


async def test_the_config_channel_moving_to_another_master_leaves_no_edge_serving_a_stale_config(
    stack: Stack, database_url: str, redis_cluster: ClusterNodes
) -> None:
    """The edges listen on a sharded channel: when its slot moves, Redis unsubscribes them, they subscribe
    again on the new owner, and a delete's 2xx still means every edge answers 404 from then on."""
    stack.start_control()
    edge = stack.start_edge()
    account = await make_account(database_url)
    channel = Keys(stack.env["HOOKYARD_REDIS_PREFIX"]).config_channel
    slot = key_slot(channel.encode())
    source = redis_cluster.owner(slot)
    target = next(p for p in redis_cluster.ports if p != source)

    def listeners(port: int) -> int:
        return int(redis_cluster.call(port, "pubsub", "shardnumsub", channel).split()[-1])

    def deleted_and_refused() -> None:
        endpoint = new_endpoint(stack, account)
        token = endpoint["ingest_url"].rsplit("/", 1)[-1]
        assert httpx.post(f"{edge}/h/{token}", content=b"{}").status_code == 200  # now in the edge's cache
        gone = httpx.delete(f"{stack.control_url}/v1/endpoints/{endpoint['id']}", headers=account.headers)
        assert gone.status_code == 200, gone.text
        assert httpx.post(f"{edge}/h/{token}", content=b"{}").status_code == 404

    assert listeners(source) == 1
    deleted_and_refused()
    # The third master still names the source: an edge that reloads its slot map from it must follow MOVED.
    stale = next(p for p in redis_cluster.ports if p not in (source, target))
    _move_slot(redis_cluster, slot, target, held_back=stale)
    deadline = time.monotonic() + 15
    while listeners(target) != 1:  # the edge noticed and subscribed on the new owner
        assert time.monotonic() < deadline, "the edge never subscribed again on the channel's new node"
        await asyncio.sleep(0.05)
    assert redis_cluster.call(stale, "cluster", "setslot", str(slot), "node", redis_cluster.node_id(target)) == "OK"
    assert listeners(source) == 0
    deleted_and_refused()


async def test_a_master_that_dies_costs_only_its_own_shards_requests(
    stack: Stack, database_url: str, tmp_path: Path
) -> None:
    """A cluster of its own (this one loses a master): with one master gone, the requests of the shards it
    held are refused (503, nothing acknowledged) and those of the other masters' shards, sent at the same
    moment and so written in the same batches, are all stored."""
    binaries = redis_server_7()
    assert binaries is not None  # the session cluster fixture skipped already otherwise
    cluster = ClusterNodes(*binaries, tmp_path / "cluster")
    (tmp_path / "cluster").mkdir()
    cluster.start()
    try:
        for port in cluster.ports:  # the surviving masters keep serving their own slots
            assert cluster.call(port, "config", "set", "cluster-require-full-coverage", "no") == "OK"
        stack.env.update(REDIS_URL=cluster.url, HOOKYARD_STREAM_SHARDS="3")
        stack.start_control()
        stack.start_edge()
        account = await make_account(database_url)
        keys = Keys(stack.env["HOOKYARD_REDIS_PREFIX"], shards=3, cluster=True)
        by_shard: dict[int, str] = {}
        while len(by_shard) < 3:
            endpoint = new_endpoint(stack, account)
            by_shard.setdefault(keys.shard_for(endpoint["id"]), endpoint["ingest_url"].rsplit("/", 1)[-1])
        config_master = cluster.owner(key_slot(keys.config_channel.encode()))
        doomed = next(s for s in range(3) if cluster.owner(key_slot(keys.ingest_stream(s).encode())) != config_master)
        async with httpx.AsyncClient(timeout=10) as client:
            for token in by_shard.values():  # every config cached while the edge listens
                assert (await client.post(f"{stack.edge_url}/h/{token}", content=b"{}")).status_code == 200
            cluster.call(cluster.owner(key_slot(keys.ingest_stream(doomed).encode())), "shutdown", "nosave")

            async def send(shard: int) -> int:
                return (await client.post(f"{stack.edge_url}/h/{by_shard[shard]}", content=b"{}")).status_code

            answers = await asyncio.gather(*(send(shard) for _ in range(40) for shard in range(3)))
        by_answer = Counter(zip([s for _ in range(40) for s in range(3)], answers, strict=True))
        for shard in range(3):
            expected = 503 if shard == doomed else 200
            assert by_answer[(shard, expected)] == 40, by_answer
    finally:
        cluster.stop()
