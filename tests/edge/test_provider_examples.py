"""Providers' published examples replayed: the worked example a provider (or its own SDK's tests) publishes,
with its secret, request and signature as published (``tests/data/provider_examples``, each with its source
and licence), is verified, and a copy with one byte of the body changed is refused (for a shared token,
which vouches for no body, one character of the token).

Where the example's URL is not an ingest URL (Twilio signs the URL it posted to, and the published one is
``https://mycompany.com/...``), the catalog's check is given that URL directly; every other example is sent
to the in-process edge as published, at the example's own time where its scheme bounds the timestamp (the
edge's clock, ``edge.ingest.time``, is set to it). A provider whose catalog entry names a published example
must have one here, so the providers page cannot claim one the tests do not replay."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import edge.ingest
from shared.providers import CATALOG
from shared.providers.values import Body
from shared.providers.verify import CatalogCheck, Request
from tests.edge.test_edge_ingest import put_endpoint, stored
from tests.helpers import (
    assert_error,
    redis_connection,  # noqa: F401 - the `redis` fixture
)

DATA = Path(__file__).resolve().parents[1] / "data" / "provider_examples"


class Example(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    provider: str
    name: str
    source: str
    licence: str
    secret: str
    url: str | None
    """The URL the example was posted to, when its scheme signs it."""
    at: int | None
    """The example's own time (Unix seconds), when its scheme bounds the timestamp."""
    headers: dict[str, str]
    routing: dict[str, str]
    """Headers the example leaves out and the edge needs to name the provider (none is signed)."""
    body: str


EXAMPLES = msgspec.json.decode((DATA / "examples.json").read_bytes(), type=dict[str, tuple[Example, ...]])["examples"]


def _changed(text: str) -> str:
    """``text`` with one character changed (its last letter or digit)."""
    raw = bytearray(text.encode())
    for at in range(len(raw) - 1, -1, -1):
        if chr(raw[at]).isalnum():
            raw[at] = ord("0") if raw[at] != ord("0") else ord("1")
            return raw.decode()
    raise AssertionError("no letter or digit to change")


def tampered(example: Example) -> tuple[bytes, dict[str, str]]:
    """The example's body and headers with what its scheme vouches for changed by one character: the body
    for a signature; for a shared token, which vouches for no body, the token itself (in the body where the
    provider puts it, as Microsoft Graph's ``clientState``, else in its header)."""
    scheme = CATALOG[example.provider].scheme
    if scheme.kind not in ("token", "basic"):
        return _changed(example.body).encode(), example.headers
    if scheme.body_token is not None:
        quoted = msgspec.json.encode(example.secret).decode()
        assert example.body.count(quoted) == 1, "the published token, once, in the body"
        return example.body.replace(quoted, msgspec.json.encode(_changed(example.secret)).decode()).encode(), (
            example.headers
        )
    header = scheme.header or ""
    return example.body.encode(), {**example.headers, header: _changed(example.headers[header])}


class _Clock:
    """``edge.ingest``'s ``time`` module, its wall clock set to an example's time."""

    def __init__(self, at: float) -> None:
        self._at = at
        self.monotonic = time.monotonic

    def time(self) -> float:
        return self._at


def test_every_published_example_the_catalog_names_is_replayed() -> None:
    replayed = {example.provider for example in EXAMPLES}
    for provider in CATALOG.values():
        if provider.proof == "example" or provider.example:
            assert provider.name in replayed, provider.name
            assert provider.example in {e.source for e in EXAMPLES if e.provider == provider.name}
    for example in EXAMPLES:
        assert example.source.startswith("https://")
        assert example.licence


@pytest.mark.parametrize("example", [e for e in EXAMPLES if CATALOG[e.provider].kind is None], ids=lambda e: e.name)
def test_the_catalog_check_verifies_the_published_example(example: Example) -> None:
    check = CatalogCheck(CATALOG[example.provider], example.secret)
    now = example.at if example.at is not None else time.time()

    def verdict(body: bytes, sent: dict[str, str]) -> Any:
        raw = {name.encode(): value.encode() for name, value in sent.items()}
        return check(Request(raw, Body(raw, body), "POST", example.url or ""), now)

    assert tuple(verdict(example.body.encode(), example.headers)) == (True, None, example.provider)
    assert tuple(verdict(*tampered(example))) == (False, "signature_mismatch", example.provider)


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.url is None], ids=lambda e: e.name)
async def test_the_edge_stores_the_published_example_verified_and_refuses_it_tampered(
    edge_client, redis, edge_settings, monkeypatch, example: Example
) -> None:
    if example.at is not None:
        monkeypatch.setattr(edge.ingest, "time", _Clock(example.at))
    # A provider whose request carries no header that names it (Microsoft Graph; Okta, whose only such header
    # is its verification GET's) is named in the endpoint's config, as its users set it.
    headers = {**example.routing, **example.headers}
    named = None if set(CATALOG[example.provider].recognise) & set(headers) else example.provider
    token = await put_endpoint(
        redis, edge_settings, hmac_enabled=True, secret=example.secret, on_failure="reject", provider=named
    )
    resp = await edge_client.post(f"/h/{token}", content=example.body.encode(), headers=headers)
    assert resp.status_code == 200, resp.text
    (record,) = await stored(redis, edge_settings)
    assert (record.provider, record.signature_valid, record.signature_failure_reason) == (example.provider, True, None)
    body, sent = tampered(example)
    refused = await edge_client.post(f"/h/{token}", content=body, headers={**example.routing, **sent})
    assert "signature_mismatch" in assert_error(refused, 401, "signature_invalid")["message"]
    assert len(await stored(redis, edge_settings)) == 1


def test_the_examples_file_is_what_the_readme_lists() -> None:
    readme = (DATA / "README.md").read_text()
    for example in EXAMPLES:
        assert example.name in readme
        assert example.source in readme
    assert json.loads((DATA / "examples.json").read_text())["examples"]
