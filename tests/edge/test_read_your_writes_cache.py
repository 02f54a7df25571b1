"""The edge's config cache in process, against the real Redis and the real control app in the same loop:
one lookup in flight per token, notices that detach what was read before them, nothing served from the
cache while the listener is away, and control answering a change only once every edge confirmed it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
import redis.asyncio as aioredis

from edge.config import EndpointCache
from shared import redis_client
from shared.keys import CONFIGS_COMPLETE, Keys
from shared.settings import Settings
from shared.wire import EdgeEndpoint, encode
from tests.conftest import Account
from tests.helpers import concurrent_client, subscribed, token_of, wait_for

BURST = 200


@pytest.fixture
async def edge_redis(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    client = redis_client.connect(settings.redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def listening(cache: EndpointCache) -> AsyncIterator[asyncio.Task[None]]:
    """The cache with its listener running (subscribed, confirmed), as the edge app starts it."""
    task = asyncio.create_task(cache.listen())
    try:
        async with asyncio.timeout(10):
            await cache.listening.wait()
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def edge_and_control(
    settings: Settings, redis: aioredis.Redis
) -> AsyncIterator[tuple[EndpointCache, httpx.AsyncClient]]:
    """A listening cache and the control app, both in this loop (the app's lifespan cannot be a fixture:
    pytest-asyncio would end it in another task than the one that started it)."""
    cache = EndpointCache(redis, Keys(settings.redis_prefix))
    async with concurrent_client(settings) as control, listening(cache):
        yield cache, control


async def new_endpoint(control: httpx.AsyncClient, account: Account, **body: Any) -> tuple[dict[str, Any], str]:
    resp = await control.post("/v1/endpoints", json={"name": "cache", **body}, headers=account.headers)
    assert resp.status_code == 201, resp.text
    made = resp.json()
    return made, token_of(made["ingest_url"])


class GetSpy:
    """Wraps the real client's GET: counts calls and can hold every answer until ``release``."""

    def __init__(self, redis: aioredis.Redis, *, hold: bool = True, fail: Exception | None = None) -> None:
        self.real = redis.get
        self.calls = 0
        self.fail = fail
        self.gate = asyncio.Event()
        if not hold:
            self.gate.set()

    async def __call__(self, key: str) -> bytes | None:
        self.calls += 1
        value = await self.real(key)  # the read happens now; the answer waits for the gate
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return value

    def release(self) -> None:
        self.gate.set()


async def parked(tasks: list[asyncio.Task[Any]]) -> None:
    """Returns once every task is waiting (none can still be about to start a lookup of its own)."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not any(t.done() for t in tasks)


# -- one lookup in flight per token -----------------------------------------------------------------


async def test_a_burst_of_misses_costs_one_get(account, settings, edge_redis, monkeypatch):
    async with edge_and_control(settings, edge_redis) as (cache, control):
        _, token = await new_endpoint(control, account)
        spy = GetSpy(edge_redis)
        monkeypatch.setattr(edge_redis, "get", spy)
        burst = [asyncio.create_task(cache.get(token)) for _ in range(BURST)]
        await wait_for(lambda: asyncio.sleep(0, spy.calls))
        await parked(burst)
        spy.release()
        served = await asyncio.gather(*burst)
        assert spy.calls == 1
        assert len({id(s) for s in served}) == 1
        assert served[0] is not None
        assert await cache.get(token) is served[0]  # cached now: no further GET
        assert spy.calls == 1


async def test_a_failed_lookup_reaches_every_waiter_and_is_not_kept(account, settings, edge_redis, monkeypatch):
    async with edge_and_control(settings, edge_redis) as (cache, control):
        _, token = await new_endpoint(control, account)
        spy = GetSpy(edge_redis, fail=ConnectionError("redis went away"))
        monkeypatch.setattr(edge_redis, "get", spy)
        burst = [asyncio.create_task(cache.get(token)) for _ in range(BURST)]
        await wait_for(lambda: asyncio.sleep(0, spy.calls))
        await parked(burst)
        spy.release()
        results = await asyncio.gather(*burst, return_exceptions=True)
        assert spy.calls == 1
        assert all(isinstance(r, ConnectionError) for r in results)
        assert token not in cache.entries
        spy.fail = None
        assert await cache.get(token) is not None  # the next request looks again
        assert spy.calls == 2


async def test_a_waiter_that_gives_up_does_not_cancel_the_others(account, settings, edge_redis, monkeypatch):
    async with edge_and_control(settings, edge_redis) as (cache, control):
        _, token = await new_endpoint(control, account)
        spy = GetSpy(edge_redis)
        monkeypatch.setattr(edge_redis, "get", spy)
        first = asyncio.create_task(cache.get(token))
        second = asyncio.create_task(cache.get(token))
        await wait_for(lambda: asyncio.sleep(0, spy.calls))
        await parked([first, second])
        first.cancel()  # the sender of the first request went away
        spy.release()
        assert await second is not None
        assert spy.calls == 1


async def test_a_notice_detaches_the_lookup_in_flight(account, settings, edge_redis, monkeypatch):
    """A GET that read before a change is not shared with requests that arrive after it, nor cached."""
    async with edge_and_control(settings, edge_redis) as (cache, control):
        made, token = await new_endpoint(control, account, environment="staging")
        spy = GetSpy(edge_redis)
        monkeypatch.setattr(edge_redis, "get", spy)
        before = asyncio.create_task(cache.get(token))
        await wait_for(lambda: asyncio.sleep(0, spy.calls))  # it has read "staging"; its answer is held
        resp = await control.patch(
            f"/v1/endpoints/{made['id']}", json={"environment": "sandbox"}, headers=account.headers
        )
        assert resp.status_code == 200, resp.text
        spy.release()
        after = await cache.get(token)
        assert spy.calls == 2
        assert after.config.environment == "sandbox"
        assert (await before).config.environment == "staging"
        assert cache.entries[token][0].config.environment == "sandbox"


async def test_a_tombstone_is_served_as_unknown(settings, edge_redis):
    keys = Keys(settings.redis_prefix)
    cache = EndpointCache(edge_redis, keys)
    tombstone = EdgeEndpoint(endpoint_id="", account_id="", environment="", version=7, deleted=True)
    await edge_redis.set(keys.endpoint_config("buried000000000000000000"), encode(tombstone))
    async with listening(cache):
        assert await cache.get("buried000000000000000000") is None
        assert cache.entries["buried000000000000000000"][0] is None


async def test_a_miss_read_before_a_rebuild_that_ends_before_the_marker_read_is_not_unknown(
    account, settings, edge_redis, monkeypatch
):
    """After a Redis restart without its data, the sweep rebuilds every config and then marks them complete.
    A lookup whose config read came before the rebuild and whose marker read came after it saw a miss and a
    complete set: on that alone it said "no such endpoint" (the fault bench's one 404 after a restart). The
    rebuild is made to land between the two reads here."""
    keys = Keys(settings.redis_prefix)
    async with edge_and_control(settings, edge_redis) as (cache, control):
        _, token = await new_endpoint(control, account)
        stored = await edge_redis.get(keys.endpoint_config(token))
        assert stored is not None
        await edge_redis.delete(keys.endpoint_config(token), keys.config_marker)  # what the restart does
        real = edge_redis.get

        async def rebuilt_after_the_miss(key: str) -> bytes | None:
            value = await real(key)
            if key == keys.endpoint_config(token) and value is None:
                await edge_redis.set(keys.endpoint_config(token), stored)  # the sweep: configs, then the marker
                await edge_redis.set(keys.config_marker, CONFIGS_COMPLETE)
            return value

        monkeypatch.setattr(edge_redis, "get", rebuilt_after_the_miss)
        served = await cache.get(token)
    assert served is not None


# -- the listener --------------------------------------------------------------------------------------


async def test_without_its_listener_the_cache_serves_only_what_redis_holds_now(settings, edge_redis, monkeypatch):
    keys = Keys(settings.redis_prefix)
    token = "listenerless0000000000000"
    stored = EdgeEndpoint(endpoint_id="ep_1", account_id="acct_1", environment="staging", version=1)
    await edge_redis.set(keys.endpoint_config(token), encode(stored))
    cache = EndpointCache(edge_redis, keys)
    async with listening(cache) as listener:
        assert (await cache.get(token)).config.environment == "staging"
        assert token in cache.entries
        listener.cancel()  # the listener is gone (in production: reconnecting after Redis dropped it)
        with contextlib.suppress(asyncio.CancelledError):
            await listener
        assert not cache.listening.is_set()
        assert cache.entries == {}
        # A change that no notice announces (nobody would receive it): the next request sees it.
        changed = msgspec.structs.replace(stored, environment="sandbox", version=2)
        await edge_redis.set(keys.endpoint_config(token), encode(changed))
        assert (await cache.get(token)).config.environment == "sandbox"
        assert cache.entries == {}
        # Nothing is shared either: a lookup in flight could have read before the change.
        spy = GetSpy(edge_redis)
        monkeypatch.setattr(edge_redis, "get", spy)
        both = [asyncio.create_task(cache.get(token)) for _ in range(2)]
        await wait_for(lambda: asyncio.sleep(0, spy.calls == 2))
        spy.release()
        await asyncio.gather(*both)
        assert cache.entries == {}


# -- control waits for the edges ----------------------------------------------------------------------


async def test_a_change_answers_only_once_the_edge_dropped_its_copy(account, settings, edge_redis, monkeypatch):
    async with edge_and_control(settings, edge_redis) as (cache, control):
        made, token = await new_endpoint(control, account)
        assert not (await cache.get(token)).checks
        real_apply = cache._apply
        applied: list[float] = []

        async def slow_apply(data: bytes) -> None:
            await asyncio.sleep(0.3)  # an edge busy serving: its notice is applied late
            await real_apply(data)
            applied.append(time.monotonic())

        monkeypatch.setattr(cache, "_apply", slow_apply)
        resp = await control.patch(
            f"/v1/endpoints/{made['id']}/auth-config",
            json={"hmac_enabled": True, "secret": "whsec_" + "a" * 32},
            headers=account.headers,
        )
        answered = time.monotonic()
        assert resp.status_code == 200, resp.text
        assert applied, "the change answered before the edge applied it"
        assert applied[0] <= answered
        assert token not in cache.entries
        assert (await cache.get(token)).checks


async def test_an_edge_that_does_not_confirm_delays_the_answer_by_the_timeout_only(
    settings, account, edge_redis, caplog
):
    settings = msgspec.structs.replace(settings, config_ack_timeout_s=0.5)
    keys = Keys(settings.redis_prefix)
    cache = EndpointCache(edge_redis, keys)
    async with concurrent_client(settings) as control, listening(cache):
        made, _ = await new_endpoint(control, account)
        async with subscribed(edge_redis, keys.config_channel):  # subscribed, never confirms
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="hookyard.control.edge_config"):
                resp = await control.patch(
                    f"/v1/endpoints/{made['id']}", json={"environment": "sandbox"}, headers=account.headers
                )
            took = time.monotonic() - started
        assert resp.status_code == 200, resp.text  # committed: answered all the same
        assert 0.5 <= took < 5
        assert "1 of 2 edge listeners did not confirm" in caplog.text
        assert not [k async for k in edge_redis.scan_iter(match=keys.config_ack("*"))], "ack lists left behind"


async def test_the_cache_is_bounded_by_what_its_configs_weigh(settings, edge_redis):
    """Configs are the tenants' (an allowlist of 256 CIDRs, long ids): the cache starts over past its byte
    bound, however few entries that is (issue 42: caches bounded in bytes, not entries)."""
    keys = Keys(settings.redis_prefix)
    cache = EndpointCache(edge_redis, keys, max_bytes=2 * 1024 * 1024)
    allowlist = tuple(f"10.{i // 256}.{i % 256}.0/24" for i in range(256))
    tokens = [f"heavy{n:019d}" for n in range(300)]
    for n, token in enumerate(tokens):
        config = EdgeEndpoint(endpoint_id=f"ep_{n}", account_id="acct_x", environment="production", allowlist=allowlist)
        await edge_redis.set(keys.endpoint_config(token), encode(config))
    async with listening(cache):
        for token in tokens:
            assert (await cache.get(token)) is not None
            assert cache.nbytes <= cache.max_bytes
            assert cache.nbytes == sum(entry[2] for entry in cache.entries.values())
        assert len(cache.entries) < len(tokens)
        cache.invalidate(tokens[-1])
        assert cache.nbytes == sum(entry[2] for entry in cache.entries.values())
