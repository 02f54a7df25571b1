"""With verification off, the edge still proves a signature made with the endpoint's own secret (what
``hookyard trigger`` and ``send_test_webhook`` send), so a sample reads "verified" wherever it is shown;
anything it cannot prove stays "not checked" (null, no reason) and is never refused, whatever
``on_failure`` says: nobody asked for the check. With verification on nothing changes.

The edge in process (``edge.app``) against the test Redis, through the compiled fast path and through the
Python checks alone (where ``shared._native`` is not built)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from edge.app import EdgeApp, create_app
from shared.ids import ingest_token, new_id, signing_secret
from shared.keys import Keys
from shared.samples import EVENT_TYPES, PROVIDERS, sample
from shared.settings import Settings, load_settings
from shared.signatures import mac as signature_mac
from shared.wire import EdgeAuth, EdgeEndpoint, IngestRecord, decode_records, encode
from tests.helpers import redis_connection  # noqa: F401 - the `redis` fixture

SECRET = signing_secret()
OTHER = signing_secret()


@pytest.fixture(params=["compiled", "python"])
def implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and signature_mac.native is None:
        pytest.fail("shared._native is not built here")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "python":
            patch.setattr(signature_mac, "native", None)
        yield request.param


@pytest.fixture
async def edge(servers: Any, redis_prefix: str, implementation: str) -> AsyncIterator[tuple[Settings, EdgeApp]]:
    settings = load_settings({}, redis_url=servers.redis_url, redis_prefix=redis_prefix)
    app = create_app(settings)
    await app.startup()
    try:
        yield settings, app
    finally:
        await app.shutdown()


async def _endpoint(redis: aioredis.Redis, settings: Settings, **auth: Any) -> str:
    token = ingest_token()
    config = EdgeEndpoint(
        endpoint_id=new_id("ep"), account_id=new_id("acct"), environment="production", auth=EdgeAuth(**auth)
    )
    await redis.set(Keys(settings.redis_prefix).endpoint_config(token), encode(config))
    return token


async def _send(app: EdgeApp, token: str, body: bytes, headers: Any) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge.test") as client:
        return await client.post(f"/h/{token}", content=body, headers=headers)


async def _stored(redis: aioredis.Redis, settings: Settings) -> list[IngestRecord]:
    entries = await redis.xrange(Keys(settings.redis_prefix).ingest_stream(0))
    return [record for _, fields in entries for record in decode_records(fields[b"r"])]


ONE_EACH = [(provider, EVENT_TYPES[provider][0], family) for provider in PROVIDERS for family in ("vendor", "neutral")]
"""The four kinds (hookyard proves their samples with the endpoint's secret in C); the catalog's others: tests/edge."""


async def test_off_a_sample_signed_with_the_endpoints_secret_is_proven(edge, redis) -> None:
    settings, app = edge
    token = await _endpoint(redis, settings, secret=SECRET)  # verification off, on_failure "reject"
    for provider, event_type, family in ONE_EACH:
        made = sample(provider, event_type, secret=SECRET, family=family)
        assert (await _send(app, token, made.body, made.headers)).status_code == 200
    records = await _stored(redis, settings)
    assert [(r.provider, r.signature_valid, r.signature_failure_reason) for r in records] == [
        (provider, True, None) for provider, _, _ in ONE_EACH
    ]


async def test_off_what_cannot_be_proven_is_not_checked_and_never_refused(edge, redis) -> None:
    settings, app = edge
    token = await _endpoint(redis, settings, secret=SECRET, on_failure="reject")
    stale = time.time() - 3600
    unproven = [
        sample("payments", "invoice.paid", secret=OTHER, family="vendor"),  # a real provider's own secret
        sample("identity", "user.created", secret=OTHER, family="vendor"),
        sample("commerce", "orders/paid", secret=OTHER),
        sample("payments", "invoice.paid", secret=SECRET, now=stale),  # ours, but out of tolerance
        sample("identity", "user.created", secret=SECRET, now=stale),
        sample("code_host", "push"),  # unsigned
    ]
    for made in unproven:
        assert (await _send(app, token, made.body, made.headers)).status_code == 200
    made = sample("payments", "invoice.paid", secret=SECRET, family="vendor")  # a repeated signature header
    doubled = [*made.headers.items(), ("stripe-signature", made.headers["stripe-signature"])]
    assert (await _send(app, token, made.body, doubled)).status_code == 200
    records = await _stored(redis, settings)
    assert [(r.signature_valid, r.signature_failure_reason) for r in records] == [(None, None)] * 7


async def test_off_a_custom_header_is_proven_too(edge, redis) -> None:
    settings, app = edge
    token = await _endpoint(redis, settings, secret=SECRET, header_name="X-Acme-Signature")
    made = sample("code_host", "push", secret=SECRET, header_name="X-Acme-Signature", family="vendor")
    wrong = sample("code_host", "push", secret=OTHER, header_name="X-Acme-Signature", family="vendor")
    for each in (made, wrong):
        assert (await _send(app, token, each.body, each.headers)).status_code == 200
    records = await _stored(redis, settings)
    assert [(r.signature_valid, r.signature_failure_reason) for r in records] == [(True, None), (None, None)]


async def test_on_a_failure_still_counts(edge, redis) -> None:
    settings, app = edge
    token = await _endpoint(redis, settings, hmac_enabled=True, secret=SECRET, on_failure="accept_log")
    refusing = await _endpoint(redis, settings, hmac_enabled=True, secret=SECRET, on_failure="reject")
    wrong = sample("payments", "invoice.paid", secret=OTHER, family="vendor")
    assert (await _send(app, token, wrong.body, wrong.headers)).status_code == 200
    refused = await _send(app, refusing, wrong.body, wrong.headers)
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "signature_invalid")
    records = await _stored(redis, settings)
    assert [(r.signature_valid, r.signature_failure_reason) for r in records] == [(False, "signature_mismatch")]
