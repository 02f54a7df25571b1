"""What the provider tests share: an endpoint of one catalog provider on the in-process edge, and a signed
request of that provider's sample (``shared.providers.sign``), or of a body a provider's own library signed."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from shared.providers import CATALOG, Provider
from shared.providers.sign import sign, sign_body
from shared.providers.values import put, walk
from tests.edge.test_edge_ingest import put_endpoint

__all__ = ("BASE", "body_of", "endpoint_for", "key_pair", "signed_request", "tamper_signed", "url_of")

BASE = "http://edge.test"
SECRET = "s3cr3t-of-the-provider"


def url_of(token: str) -> str:
    return f"{BASE}/h/{token}"


def key_pair(provider: Provider) -> tuple[Any, str]:
    """(private key, the public key as the provider shows it) for a public-key scheme."""
    if provider.scheme.kind == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
        raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return private, raw.hex() if provider.scheme.encoding == "hex" else base64.b64encode(raw).decode()
    private = ec.generate_private_key(ec.SECP256R1())
    der = private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, base64.b64encode(der).decode()


def secret_for(provider: Provider, text: str = SECRET) -> str:
    """A secret in the form the provider shows it, made of ``text``."""
    if provider.scheme.kind == "basic":
        return "hookyard:" + text
    if provider.scheme.key == "whsec":
        return "whsec_" + base64.b64encode(text.encode()).decode()
    return text


async def endpoint_for(redis, settings, provider: Provider, secret: str, *, named: bool | None = None, **auth) -> str:
    """An endpoint verifying ``provider`` with ``secret`` and refusing failures; the provider is named in its
    config when its headers cannot say it (``named`` forces either way)."""
    if named is None:
        named = not provider.recognise
    if named:
        auth.setdefault("provider", provider.name)
    return await put_endpoint(
        redis, settings, hmac_enabled=True, secret=secret, on_failure=auth.pop("on_failure", "reject"), **auth
    )


def body_of(provider: Provider, secret: str) -> tuple[bytes, dict[str, str]]:
    """The provider's sample body and content type (its shared token in the body where it puts one)."""
    sample = provider.sample
    assert sample is not None
    value = sample.body
    if provider.scheme.body_token:
        value = msgspec.json.decode(msgspec.json.encode(value))
        value["value"][0]["clientState"] = secret
    if sample.form:
        from urllib.parse import urlencode

        return urlencode(value).encode(), {"content-type": "application/x-www-form-urlencoded", **sample.headers}
    return msgspec.json.encode(value), {"content-type": "application/json", **sample.headers}


def signed_request(provider: Provider, token: str, secret: str, private: Any = None) -> tuple[bytes, dict[str, str]]:
    body, headers = body_of(provider, secret)
    if provider.scheme.signature_body is not None:  # signed inside the body
        return sign_body(provider, body, secret, form=provider.sample.form), headers
    headers.update(sign(provider, body, secret, headers=headers, url=url_of(token), private_key=private))
    return body, headers


def providers(*kinds: str) -> list[Provider]:
    return [p for p in CATALOG.values() if p.kind is None and (not kinds or p.scheme.kind in kinds)]


def tamper_signed(provider: Provider, body: bytes) -> bytes:
    """``body`` of a provider that signs inside it, with the first value its signature covers changed (a
    change elsewhere is not the provider's to detect: Mailgun signs its timestamp and token only)."""
    from urllib.parse import parse_qsl, urlencode

    form = provider.sample is not None and provider.sample.form
    value = dict(parse_qsl(body.decode(), keep_blank_values=True)) if form else msgspec.json.decode(body)
    path = provider.scheme.signed.split("{body:", 1)[1].split("}", 1)[0]
    put(value, path, str(walk(value, path)) + "0")
    return urlencode(value).encode() if form else msgspec.json.encode(value)
