"""The per-address limit of /api/start and /api/register: 429 with Retry-After, one bucket per client address
and route, X-Forwarded-For believed only from HOOKYARD_TRUSTED_PROXIES, IPv6 clients limited by their /64."""

from __future__ import annotations

import httpx
import pytest

from shared.settings import Settings, load_settings
from tests.helpers import assert_error, concurrent_client

RATE = 3


def _settings(servers, database_url: str, redis_prefix: str, **extra: object) -> Settings:
    return load_settings(
        {},
        database_url=database_url,
        redis_url=servers.redis_url,
        redis_prefix=redis_prefix,
        start_rate_per_min=RATE,
        **extra,
    )


@pytest.fixture
def behind_proxy(servers, database_url, redis_prefix) -> Settings:
    """The app as seen through a proxy on loopback (httpx's ASGI transport connects from 127.0.0.1)."""
    return _settings(servers, database_url, redis_prefix, trusted_proxies=["127.0.0.0/8"])


@pytest.fixture
def direct(servers, database_url, redis_prefix) -> Settings:
    return _settings(servers, database_url, redis_prefix)


def _from(address: str) -> dict[str, str]:
    return {"x-forwarded-for": address}


async def _start(client: httpx.AsyncClient, address: str) -> httpx.Response:
    client.cookies.clear()
    return await client.post("/api/start", headers=_from(address))


async def test_start_is_limited_per_client_address_with_retry_after(behind_proxy):
    async with concurrent_client(behind_proxy) as client:
        for _ in range(RATE):
            assert (await _start(client, "203.0.113.5")).status_code == 200
        limited = await _start(client, "203.0.113.5")
        err = assert_error(limited, 429, "rate_limited")
        assert "this client address" in err["message"]
        assert f"{RATE}/min" in err["message"]
        retry_after = int(limited.headers["retry-after"])
        assert 1 <= retry_after <= 60 // RATE + 1  # one token back every 20 s

        assert (await _start(client, "203.0.113.6")).status_code == 200  # another client: its own bucket
        # A session cookie does not buy more: reusing a session is charged like any call.
        assert client.cookies.get("hy_session")
        assert_error(await client.post("/api/start", headers=_from("203.0.113.5")), 429, "rate_limited")


async def test_register_has_a_bucket_of_its_own(behind_proxy):
    async with concurrent_client(behind_proxy) as client:
        for _ in range(RATE + 1):
            await _start(client, "203.0.113.7")
        for i in range(RATE):
            resp = await client.post("/api/register", json={"email": f"u{i}@example.com"}, headers=_from("203.0.113.7"))
            assert resp.status_code == 201, resp.text
        resp = await client.post("/api/register", json={"email": "late@example.com"}, headers=_from("203.0.113.7"))
        assert_error(resp, 429, "rate_limited")
        assert int(resp.headers["retry-after"]) >= 1


async def test_the_rightmost_untrusted_hop_is_the_client(behind_proxy):
    """A client behind the trusted proxy cannot pick its bucket by adding hops to the left."""
    async with concurrent_client(behind_proxy) as client:
        for i in range(RATE):
            resp = await client.post("/api/start", headers=_from(f"198.51.100.{i}, 203.0.113.9"))
            assert resp.status_code == 200
        assert_error(await _start(client, "192.0.2.1, 203.0.113.9"), 429, "rate_limited")
        assert_error(await _start(client, "203.0.113.9, 127.0.0.1"), 429, "rate_limited")  # trusted hop skipped


async def test_ipv6_clients_share_the_limit_of_their_64(behind_proxy):
    async with concurrent_client(behind_proxy) as client:
        for i in range(RATE):
            assert (await _start(client, f"2001:db8:1:2::{i + 1}")).status_code == 200
        assert_error(await _start(client, "2001:db8:1:2:ffff::1"), 429, "rate_limited")
        assert (await _start(client, "2001:db8:1:3::1")).status_code == 200
        assert (await _start(client, "::ffff:203.0.113.20")).status_code == 200  # IPv4-mapped is the IPv4 one
        for _ in range(RATE - 1):
            await _start(client, "203.0.113.20")
        assert_error(await _start(client, "203.0.113.20"), 429, "rate_limited")


async def test_without_trusted_proxies_forwarded_for_is_ignored(direct):
    """Every request comes from 127.0.0.1; the header cannot spread them over buckets."""
    async with concurrent_client(direct) as client:
        for i in range(RATE):
            assert (await _start(client, f"203.0.113.{i}")).status_code == 200
        assert_error(await _start(client, "203.0.113.99"), 429, "rate_limited")


async def test_refused_requests_cost_nothing(behind_proxy):
    """A body refused before the handler never reaches the bucket."""
    async with concurrent_client(behind_proxy) as client:
        for _ in range(RATE * 2):
            resp = await client.post("/api/start", json={"surplus": 1}, headers=_from("203.0.113.30"))
            assert_error(resp, 400, "validation_error", field="surplus")
        for _ in range(RATE):
            assert (await _start(client, "203.0.113.30")).status_code == 200
