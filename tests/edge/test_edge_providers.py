"""Every catalog provider beyond the four kinds at the in-process edge: a request signed as that provider
signs is stored attributed to it and verified; a tampered copy (one byte of the body changed) is refused
401 and nothing is stored; a request of one provider is never verified with another's scheme. Each scheme
is proven against the provider's own library or its published example in ``test_provider_libraries.py``;
here the catalog's signer is the sender."""

from __future__ import annotations

import pytest

from shared.providers import CATALOG
from tests.edge.providers_support import (
    SECRET,
    endpoint_for,
    key_pair,
    providers,
    secret_for,
    signed_request,
    tamper_signed,
)
from tests.edge.test_edge_ingest import put_endpoint, stored
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)

NEW = providers()


def recognisable(provider) -> bool:
    """Whether its sample carries a header that names it (else the endpoint names its provider)."""
    _, headers = signed_request(
        provider,
        "t",
        secret_for(provider),
        key_pair(provider)[0] if provider.scheme.kind in ("ed25519", "ecdsa_p256") else None,
    )
    return bool(set(provider.recognise) & set(headers))


def test_the_catalog_has_thirty_providers_beyond_the_four_kinds() -> None:
    assert len(NEW) >= 30
    assert [p.name for p in CATALOG.values() if p.kind] == ["identity", "commerce", "payments", "code_host"]


@pytest.mark.parametrize("provider", NEW, ids=lambda p: p.name)
async def test_a_signed_request_is_verified_and_a_tampered_one_refused(
    edge_client, redis, edge_settings, provider
) -> None:
    private, secret = (
        key_pair(provider) if provider.scheme.kind in ("ed25519", "ecdsa_p256") else (None, secret_for(provider))
    )
    token = await endpoint_for(redis, edge_settings, provider, secret, named=not recognisable(provider))
    body, headers = signed_request(provider, token, secret, private)
    resp = await edge_client.post(f"/h/{token}", content=body, headers=headers)
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.signature_valid, record.signature_failure_reason) == (provider.name, True, None)
    assert record.event_type == provider.sample.event_type
    assert record.handshake is False
    tampered = body.replace(b"e", b"E", 1) if b"e" in body else body + b" "
    if provider.scheme.body_token:  # the token itself is in the body
        tampered = body.replace(secret.encode(), b"another")
    if provider.scheme.signature_body:  # so is the signature; change what it covers
        tampered = tamper_signed(provider, body)
    if provider.scheme.kind in ("token", "basic") and not provider.scheme.body_token:
        tampered_headers = {**headers, provider.scheme.header: headers[provider.scheme.header][:-1] + "x"}
        tampered = body
    else:
        tampered_headers = headers
    refused = await edge_client.post(f"/h/{token}", content=tampered, headers=tampered_headers)
    error = assert_error(refused, 401, "signature_invalid")
    wrong = ("signature_mismatch", "malformed_header") if provider.scheme.kind == "basic" else ("signature_mismatch",)
    assert error["message"].rsplit(" ", 1)[1] in wrong
    assert len(await stored(redis, edge_settings)) == 1


@pytest.mark.parametrize("provider", providers("hmac"), ids=lambda p: p.name)
async def test_the_wrong_secret_is_a_mismatch(edge_client, redis, edge_settings, provider) -> None:
    wrong = secret_for(provider, "another-secret")
    token = await endpoint_for(redis, edge_settings, provider, wrong, named=not recognisable(provider))
    body, headers = signed_request(provider, token, secret_for(provider))
    error = assert_error(await edge_client.post(f"/h/{token}", content=body, headers=headers), 401, "signature_invalid")
    assert "signature_mismatch" in error["message"]


async def test_an_unsigned_request_of_a_recognised_provider_is_stored_not_checked_without_a_secret(
    edge_client, redis, edge_settings
) -> None:
    token = await put_endpoint(redis, edge_settings)
    slack = CATALOG["slack"]
    body, headers = signed_request(slack, token, SECRET)
    assert (await edge_client.post(f"/h/{token}", content=body, headers=headers)).status_code == 200
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.event_type, record.idempotency_key) == ("slack", "app_mention", "Ev0LAN670R")
    assert record.signature_valid is None


def test_the_signed_url_is_the_public_one() -> None:
    """Twilio, Square, HubSpot and Trello sign the URL they posted to: the deployment's public edge URL when
    set, else the proxy's forwarded scheme and host, else the request's own."""
    from edge.providers import public_url

    scope = {"scheme": "http", "raw_path": b"/h/tok/sub", "query_string": b"a=1"}
    assert public_url(scope, {b"host": b"10.0.0.5:8080"}) == "http://10.0.0.5:8080/h/tok/sub?a=1"
    forwarded = {b"host": b"10.0.0.5", b"x-forwarded-proto": b"https, http", b"x-forwarded-host": b"hooks.example.com"}
    assert public_url(scope, forwarded) == "https://hooks.example.com/h/tok/sub?a=1"
    assert public_url(scope, forwarded, "https://in.example.org") == "https://in.example.org/h/tok/sub?a=1"


async def test_a_second_copy_of_a_catalog_signature_header_is_malformed(edge_client, redis, edge_settings) -> None:
    """As for the four kinds: the stored event keeps both copies, so neither copy may decide the verdict."""
    slack = CATALOG["slack"]
    token = await endpoint_for(redis, edge_settings, slack, SECRET, on_failure="accept_log")
    body, headers = signed_request(slack, token, SECRET)
    pairs = [(k.encode(), v.encode()) for k, v in headers.items()]
    resp = await edge_client.post(f"/h/{token}", content=body, headers=[*pairs, (b"x-slack-signature", b"v0=00")])
    assert resp.status_code == 200
    resp = await edge_client.post(f"/h/{token}", content=body, headers=[*pairs, (b"x-other", b"1"), (b"x-other", b"2")])
    assert resp.status_code == 200
    first, second = await stored(redis, edge_settings)
    assert (first.signature_valid, first.signature_failure_reason) == (False, "malformed_header")
    assert (second.signature_valid, second.signature_failure_reason) == (True, None)  # another header repeated
