"""The catalog providers' samples (``shared.samples`` for a provider beyond the four kinds): the same
generator ``send_test_webhook`` and ``hookyard trigger`` use, sent with the provider's own headers, is
attributed to that provider with its event type and delivery id, and verifies under its scheme with the
secret it was signed with (not with another)."""

from __future__ import annotations

import pytest

from shared.headers import raw_headers
from shared.providers import CATALOG
from shared.providers.recognise import attribute_as, recognise
from shared.providers.values import Body
from shared.providers.verify import Request, check_for
from shared.samples import EVENT_TYPES, provider_name, sample

SECRET = "a-provider-secret-of-some-length"
URL = "https://hooks.example.com/h/tok"
OTHERS = [name for name, entry in CATALOG.items() if entry.kind is None]


@pytest.mark.parametrize("name", OTHERS)
def test_a_catalog_sample_is_attributed_and_verifies(name: str) -> None:
    provider = CATALOG[name]
    made = sample(name, EVENT_TYPES[name][0], secret=SECRET, url=URL)
    raw = raw_headers(made.headers)
    if set(provider.recognise) & set(made.headers):  # else an endpoint names its provider
        assert recognise(raw) is provider
    found = attribute_as(provider, raw, Body(raw, made.body))
    assert (found.provider, found.event_type) == (name, EVENT_TYPES[name][0])
    assert made.idempotency_key
    if provider.idempotency is not None:
        assert found.idempotency_key == made.idempotency_key
    request = Request(raw, Body(raw, made.body), "POST", URL)
    if provider.scheme.kind in ("ed25519", "ecdsa_p256"):  # hookyard holds only the public key
        # Signed with a throwaway key: recognised by its headers (an unsigned Discord or SendGrid sample was
        # stored as nobody's), claiming no valid signature, and failing the check of the provider's own key.
        assert recognise(raw) is provider
        assert made.signature_header is None
        assert not check_for(name, _public_key(provider.scheme.kind))(request).valid
        return
    assert check_for(name, SECRET)(request).valid
    assert not check_for(name, SECRET + "-other")(request).valid


def test_aliases_and_any_case_name_a_provider() -> None:
    assert provider_name("Stripe") == "payments"
    assert provider_name(" github ") == "code_host"
    assert (provider_name("clerk"), provider_name("svix"), provider_name("shopify")) == ("identity",) * 2 + (
        "commerce",
    )
    assert provider_name("SLACK") == "slack"
    assert provider_name("twitter") == "x"
    assert provider_name("mail") is None


def _public_key(kind: str) -> str:
    """A provider's public key as auth-config takes it (PEM), of a key the sample was not signed with."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    private = ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else ec.generate_private_key(ec.SECP256R1())
    pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return pem.decode()
