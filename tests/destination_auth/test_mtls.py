"""mTLS and a private CA against a real TLS server of a throwaway CA (made per test with ``cryptography``)
that requires a client certificate: the handshake completes only with the destination's own certificate, the
server is trusted only through ``tls_ca``, and what is written is checked (400 naming the field)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control.db.context import Context
from tests.destination import Destination, deliveries_of, make_task, running, serving, settled
from tests.destination_auth.support import Pki
from tests.helpers import create_endpoint


@pytest.fixture
def pki() -> Pki:
    return Pki()


@pytest.fixture
def strict(pki: Pki, tmp_path: Path) -> Iterator[Destination]:
    """A destination whose handshake needs a client certificate of the test CA."""
    with serving(server_context=pki.server_context(tmp_path, require_client=True)) as server:
        yield server


async def _create(client: Any, account: Any, **body: Any) -> Any:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    return endpoint, await client.post(f"/v1/endpoints/{endpoint}/destinations", json=body, headers=account.headers)


async def test_the_client_certificate_completes_the_handshake(
    ctx: Context, client: Any, account: Any, pki: Pki, strict: Destination
) -> None:
    certificate, key = pki.issue("hookyard-client")
    endpoint, resp = await _create(
        client,
        account,
        url=strict.url,
        tls_ca=pki.pem,
        auth={"type": "mtls", "certificate": certificate, "private_key": key},
    )
    assert resp.status_code == 201, resp.text
    created = resp.json()
    assert created["auth"]["type"] == "mtls"
    assert created["auth"]["certificate"]["subject"] == "CN=hookyard-client"
    assert created["auth"]["certificate"]["issuer"] == "CN=hookyard test CA"
    assert created["tls_ca"]["certificates"][0]["subject"] == "CN=hookyard test CA"
    assert "PRIVATE KEY" not in resp.text
    made = [await make_task(ctx, strict.url, endpoint_id=endpoint, destination_id=created["id"]) for _ in range(3)]
    async with running(ctx):
        for one in made:
            await settled(ctx, one["task"], "succeeded")
    assert all(r.peer_certificate is not None for r in strict.requests)
    subject = dict(pair[0] for pair in strict.requests[0].peer_certificate["subject"])
    assert subject == {"commonName": "hookyard-client"}


async def test_without_the_client_certificate_the_handshake_fails(
    ctx: Context, client: Any, account: Any, pki: Pki, strict: Destination
) -> None:
    endpoint, resp = await _create(client, account, url=strict.url, tls_ca=pki.pem)
    assert resp.status_code == 201, resp.text
    made = await make_task(ctx, strict.url, endpoint_id=endpoint, destination_id=resp.json()["id"])
    async with running(ctx):
        await settled(ctx, made["task"], "failed")
    assert strict.requests == []
    records = await deliveries_of(ctx, made["event"])
    assert records[0]["response_status"] is None


async def test_without_tls_ca_the_private_server_is_not_trusted(
    ctx: Context, client: Any, account: Any, pki: Pki, tmp_path: Path
) -> None:
    with serving(server_context=pki.server_context(tmp_path, require_client=False)) as server:
        endpoint, resp = await _create(client, account, url=server.url)
        made = await make_task(ctx, server.url, endpoint_id=endpoint, destination_id=resp.json()["id"])
        async with running(ctx):
            row = await settled(ctx, made["task"], "failed")
        assert "CERTIFICATE_VERIFY_FAILED" in row["last_error"]
        # The same server, once its CA is the destination's: delivered.
        patched = await client.patch(
            f"/v1/destinations/{resp.json()['id']}", json={"tls_ca": pki.pem}, headers=account.headers
        )
        assert patched.status_code == 200, patched.text
        again = await make_task(ctx, server.url, endpoint_id=endpoint, destination_id=resp.json()["id"])
        async with running(ctx):
            await settled(ctx, again["task"], "succeeded")


async def test_what_is_written_is_checked(client: Any, account: Any, pki: Pki, subtests: Any) -> None:
    """Each refusal names the field and says what is wrong in our words: never the parser's Rust debug text
    (``ParseError { kind: ShortData ... }``), never anything of the key."""
    certificate, key = pki.issue("hookyard-client")
    _, other_key = pki.issue("someone-else")
    expired, expired_key = pki.issue("old", expired=True)
    lines = certificate.splitlines()
    truncated = "\n".join([*lines[:3], lines[-1]])
    damaged = "\n".join([lines[0], "A" * 64, *lines[2:]])
    key_lines = key.splitlines()
    truncated_key = "\n".join([*key_lines[:3], key_lines[-1]])
    mtls = {"type": "mtls", "certificate": certificate, "private_key": key}
    cases = [
        ({"auth": {**mtls, "private_key": other_key}}, "auth.private_key: the key does not match the certificate"),
        ({"auth": {**mtls, "certificate": "not a pem"}}, "auth.certificate: no PEM certificate in it"),
        ({"auth": {**mtls, "certificate": damaged}}, "auth.certificate: not a PEM certificate"),
        ({"auth": {**mtls, "certificate": truncated}}, "auth.certificate: the PEM certificate is truncated"),
        ({"auth": {**mtls, "private_key": "-----BEGIN"}}, "auth.private_key: not a PEM private key"),
        ({"auth": {**mtls, "private_key": truncated_key}}, "auth.private_key: the PEM private key is truncated"),
        ({"auth": {**mtls, "private_key": certificate}}, "auth.private_key: a PEM block, but not a private key"),
        ({"auth": {**mtls, "certificate": expired, "private_key": expired_key}}, "auth.certificate: expired on"),
        ({"tls_ca": "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"}, "tls_ca: not a PEM"),
        ({"tls_ca": truncated}, "tls_ca: the PEM certificate is truncated"),
        ({"tls_ca": key}, "tls_ca: no PEM certificate in it"),
        ({"url": "http://127.0.0.1:9/hook", "auth": mtls}, "auth: type mtls"),
        ({"url": "http://127.0.0.1:9/hook", "tls_ca": pki.pem}, "tls_ca"),
    ]
    for body, expected in cases:
        with subtests.test(expected=expected):
            _, resp = await _create(client, account, **{"url": "https://127.0.0.1:9/hook", **body})
            assert resp.status_code == 400, resp.text
            message = resp.json()["error"]["message"]
            assert message.startswith(expected), message
            for parser_words in ("ParseError", "asn1", "ASN.1", "Tag {", "cryptography.io", "Could not"):
                assert parser_words not in message
            assert "PRIVATE KEY" not in message
            assert key_lines[1] not in message


async def test_patching_the_url_to_http_keeps_tls_settings_honest(client: Any, account: Any, pki: Pki) -> None:
    certificate, key = pki.issue("hookyard-client")
    _, resp = await _create(
        client,
        account,
        url="https://127.0.0.1:9/hook",
        auth={"type": "mtls", "certificate": certificate, "private_key": key},
    )
    path = f"/v1/destinations/{resp.json()['id']}"
    refused = await client.patch(path, json={"url": "http://127.0.0.1:9/hook"}, headers=account.headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("auth:")
    both = await client.patch(path, json={"url": "http://127.0.0.1:9/hook", "auth": None}, headers=account.headers)
    assert both.status_code == 200
    assert both.json()["auth"] is None
