"""Samples of the catalog's providers beyond the four kinds: each entry's sample event
(``shared/providers/catalog.json``), sent with that provider's headers and signed as it signs.

The four kinds keep their richer generators (one module each); every other provider's sample is data, so
adding a provider adds its sample with no code. Its delivery id is fresh per sample where the provider puts
it in a header; a public-key provider's sample is signed with a throwaway key (hookyard holds only the public
key): recognised by its headers, and failing the check of an endpoint that holds the provider's key. So
there is no sample of such a provider's signed handshake (Discord's PING): one that fails the check is
refused 401, by design, and the refusal says so rather than only listing the samples (``handshake_named``).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

import msgspec
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from shared.providers import Provider
from shared.providers.sign import sign, sign_body
from shared.providers.values import Body, put, read
from shared.samples._gen import Gen

__all__ = ("catalog_sample", "handshake_named")


def catalog_sample(
    provider: Provider, g: Gen, secret: str | None, url: str
) -> tuple[dict[str, str], bytes, str, str | None]:
    """(headers, body, idempotency key, signature header) of ``provider``'s sample event."""
    spec = provider.sample
    assert spec is not None
    value = spec.body
    token_path = provider.scheme.body_token
    if token_path is not None and secret is not None:  # the provider sends its shared token in the body
        value = msgspec.json.decode(msgspec.json.encode(value))
        put(value, token_path, secret)
    headers = {"user-agent": f"{provider.name}-webhooks (hookyard sample)", **spec.headers}
    if spec.form:
        body = urlencode(value).encode()
        headers["content-type"] = "application/x-www-form-urlencoded"
    else:
        body = msgspec.json.encode(value)
        headers["content-type"] = "application/json"
    where = provider.idempotency
    if where is not None and where.header is not None and where.header not in headers:
        headers[where.header] = g.uuid()
    raw = {name.encode(): text.encode() for name, text in headers.items()}
    key = read(where, raw, Body(raw, body)) or g.uuid()
    signature = None
    if provider.scheme.kind in _PUBLIC_KEY:
        # Signed with a key made for this sample: its headers are how the edge recognises the provider (an
        # unsigned Discord or SendGrid sample was stored as nobody's), and no signature is claimed valid.
        headers.update(
            sign(provider, body, None, headers=headers, now=g.now, private_key=_PUBLIC_KEY[provider.scheme.kind]())
        )
    elif secret is not None and provider.scheme.signature_body is not None:
        body = sign_body(provider, body, secret, form=spec.form, now=g.now)
    elif secret is not None:
        signed = sign(provider, body, secret, headers=headers, url=url, now=g.now, msg_id=key)
        headers.update(signed)
        signature = provider.scheme.header if provider.scheme.header in signed else None
    return headers, body, key, signature


_PUBLIC_KEY: dict[str, Callable[[], ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey]] = {
    "ed25519": ed25519.Ed25519PrivateKey.generate,
    "ecdsa_p256": lambda: ec.generate_private_key(ec.SECP256R1()),
}
"""A throwaway private key per public-key scheme: hookyard holds only the provider's public key."""


_WIRE_NAMES = {
    "zoom_url_validation": ("endpoint.url_validation",),
    "twitch_callback_verification": ("webhook_callback_verification",),
}
"""A handshake's name as the provider writes it, where it is not the kind without the provider's prefix
(Slack's ``url_verification`` is)."""


def handshake_named(provider: Provider, event_type: str) -> str | None:
    """Why ``event_type`` has no sample when it names ``provider``'s handshake (its kind, as the event is
    stored, or the provider's own name for it: Slack's ``url_verification``, Zoom's
    ``endpoint.url_validation``, Discord's ``PING`` or its ``type`` 1); None otherwise. A handshake is the
    provider checking the URL, answered at the edge and never delivered: it was refused as "slack sends no
    'url_verification'", as if Slack had none."""
    kind = provider.handshake
    if kind is None:
        return None
    asked = event_type.strip().casefold()
    names = {kind, kind.removeprefix(f"{provider.name}_"), *_WIRE_NAMES.get(kind, ())}
    if asked not in names | ({"1"} if kind == "discord_ping" else set()):
        return None
    if provider.scheme.kind in _PUBLIC_KEY:
        return (
            f"is its handshake, which hookyard cannot sign: {provider.name} signs with its private key and "
            "hookyard holds only the public key, so a sample would fail the check, and a handshake that fails it "
            f"is refused 401 (as {provider.name} requires of a forged one); {provider.name} sends its own when "
            "the URL is saved in its settings"
        )
    return (
        f"is its URL-verification handshake, not a webhook event to simulate: a request {provider.name} makes to "
        "verify the URL when it is saved in its settings, which the edge answers itself (stored with "
        "handshake: true, never delivered)"
    )
