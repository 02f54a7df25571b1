"""Shared-token and Basic schemes (Postmark, GitLab, Okta, Microsoft Graph): what such a provider vouches for
is the token it sends, not the body, so these tests tamper with the token. One character of it changed, a
character added, another user's or another password's Basic credentials, or the token left out: each is
refused 401 with nothing stored. And the right token over another body is accepted: a token signs no body,
as the providers page says, so the refusals here are the token's doing, not a body check's."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from shared.providers import Provider
from tests.edge.providers_support import endpoint_for, providers, secret_for, signed_request
from tests.edge.test_edge_ingest import stored
from tests.edge.test_edge_providers import recognisable
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)

TOKENS = providers("token", "basic")


def _changed(text: str) -> str:
    """``text`` with its last character changed (to another of the same kind, so a Basic value stays
    well-formed base64 and the refusal is the credentials', not the encoding's)."""
    return text[:-1] + ("0" if text[-1] != "0" else "1")


def forgeries(provider: Provider, secret: str, body: bytes, headers: dict[str, str]) -> list[tuple[Any, ...]]:
    """(what, body, headers, the refusal's reason) for each way of getting the token wrong."""
    scheme = provider.scheme
    if scheme.body_token is not None:  # Microsoft Graph: the token is a field of the body

        def with_token(token: str | None) -> bytes:
            value = msgspec.json.decode(body)
            if token is None:
                del value["value"][0]["clientState"]
            else:
                value["value"][0]["clientState"] = token
            return msgspec.json.encode(value)

        return [
            ("token changed", with_token(_changed(secret)), headers, "signature_mismatch"),
            ("token longer", with_token(secret + "x"), headers, "signature_mismatch"),
            ("token left out", with_token(None), headers, "missing_header"),
        ]
    header = scheme.header or ""
    sent = headers[header]
    without = {name: value for name, value in headers.items() if name != header}
    forged = [("token left out", body, without, "missing_header")]
    if scheme.kind == "basic":
        user, _, password = secret.partition(":")
        for what, credentials in (("password changed", f"{user}:{_changed(password)}"), ("user changed", f"x{secret}")):
            value = scheme.prefix + base64.b64encode(credentials.encode()).decode()
            forged.append((what, body, {**headers, header: value}, "signature_mismatch"))
        return forged
    return [
        *forged,
        ("token changed", body, {**headers, header: _changed(sent)}, "signature_mismatch"),
        ("token longer", body, {**headers, header: sent + "x"}, "signature_mismatch"),
    ]


@pytest.mark.parametrize("provider", TOKENS, ids=lambda p: p.name)
async def test_a_wrong_or_missing_token_is_refused_and_another_body_with_the_right_one_is_not(
    edge_client, redis, edge_settings, provider
) -> None:
    secret = secret_for(provider)
    token = await endpoint_for(redis, edge_settings, provider, secret, named=not recognisable(provider))
    body, headers = signed_request(provider, token, secret)
    for what, sent_body, sent_headers, reason in forgeries(provider, secret, body, headers):
        refused = await edge_client.post(f"/h/{token}", content=sent_body, headers=sent_headers)
        error = assert_error(refused, 401, "signature_invalid")
        assert error["message"].rsplit(" ", 1)[1] == reason, what
    assert await stored(redis, edge_settings) == []
    other = msgspec.json.decode(body)
    other["hookyard-test"] = "a body the provider never sent"
    resp = await edge_client.post(f"/h/{token}", content=msgspec.json.encode(other), headers=headers)
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.signature_valid) == (provider.name, True)
