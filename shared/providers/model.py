"""What one catalog entry says about a provider, as msgspec Structs decoded from ``catalog.json``.

Apart from the catalog's data so that adding a provider is adding data (and its test), never code: every
scheme is the parameters of a few kinds (``hmac`` over a template, ``ed25519``, ``ecdsa_p256``, ``token``,
``basic``, ``jws``; ``builtin`` for the four kinds ``shared.signatures`` checks with its compiled path), every place
a value lives is a :class:`Where`, every handshake one of :data:`HANDSHAKES`.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

__all__ = ("HANDSHAKES", "Items", "Provider", "SampleSpec", "Scheme", "Where")

Handshake = Literal[
    "slack_url_verification",
    "zoom_url_validation",
    "meta_hub_challenge",
    "graph_validation_token",
    "dropbox_challenge",
    "x_crc",
    "twitch_callback_verification",
    "asana_hook_secret",
    "okta_verification",
    "discord_ping",
    "body_challenge_echo",
]

HANDSHAKES: tuple[str, ...] = get_args(Handshake)
"""Every handshake kind ``shared.providers.handshake`` answers (the literal's values, in its order)."""


class Where(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a value is: a header, a dotted body path (``event.type``; a number indexes an array) or fixed."""

    header: str | None = None
    body: str | None = None
    fixed: str | None = None


class Items(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A header of ``key=value`` items (``t=1,v1=ab``): which keys hold the timestamp and the signatures."""

    timestamp: str
    signature: str
    separator: str = ","
    pair: str = "="


class Scheme(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: Literal["builtin", "hmac", "ed25519", "ecdsa_p256", "token", "basic", "jws"]
    header: str | None = None
    """The signature (or token) header; for ``token`` a null header with ``body_token`` reads the body."""
    algorithm: Literal["sha256", "sha1", "sha512"] = "sha256"
    signed: str = "{body}"
    """What is signed: ``{body}``, ``{timestamp}``, ``{id}``, ``{url}``, ``{method}``, ``{form}`` (a form
    body's parameters sorted, name then value), ``{body:<path>}`` (the text at a body path or form field;
    a number as written, ``true``/``false``, nothing when absent) and literal text between them."""
    encoding: Literal["hex", "base64", "base64url"] = "hex"
    prefix: str = ""
    """Text before the signature in its header (``v0=``, ``sha256=``); ``Bearer `` for a token."""
    several: str | None = None
    """Separator of several signatures in one header (any may match), when a provider sends more than one."""
    items: Items | None = None
    timestamp_header: str | None = None
    timestamp_unit: Literal["s", "ms", "iso"] = "s"
    id_header: str | None = None
    key: Literal["utf8", "hex", "base64", "whsec", "sha1"] = "utf8"
    """How the secret becomes the HMAC key (``whsec``: base64 after ``whsec_``, as Svix; ``sha1``: the SHA-1
    digest of the secret, as Braintree's private key); public keys
    (``ed25519``, ``ecdsa_p256``) are PEM, hex or base64."""
    tolerance_s: int | None = None
    """Checked against the signed timestamp when set; None: the provider signs no time."""
    body_token: str | None = None
    """``token`` kind: a dotted body path holding the shared token (Microsoft Graph's ``clientState``)."""
    signature_body: str | None = None
    """A dotted body path (or a form field) holding the signature instead of ``header``: providers that sign
    inside the body (Mailgun's ``signature.signature``, Adyen's ``hmacSignature``, Braintree's
    ``bt_signature``). The template then names what is signed with ``{body:<path>}``."""
    timestamp_body: str | None = None
    """A dotted body path holding the signed timestamp (Mailgun's ``signature.timestamp``)."""
    label: str | None = None
    """Each signature follows a label and this separator, the label not checked (Braintree's
    ``public_key|signature``, several joined by ``several``)."""
    issuer: str | None = None
    """``jws`` kind: the ``iss`` claim the provider's token must carry (Netlify's ``netlify``)."""
    body_hash_claim: str = "sha256"
    """``jws`` kind: the claim holding the SHA-256 (hex) of the body the token vouches for."""
    body_hash_query: str | None = None
    """A query parameter of the signed URL carrying the SHA-256 (hex) of a body the template does not sign
    (Twilio's ``bodySHA256`` for a JSON body): the signature covers the URL, the parameter binds the body.
    A body that is not a form must carry it; when present it must match."""


class SampleSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    event_type: str
    body: Any
    """A JSON value, or for ``form`` a flat object of text sent form-encoded."""
    form: bool = False
    headers: dict[str, str] = {}


class Provider(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    title: str
    kind: str | None = None
    """The one of the four spec kinds this provider is (``stripe`` is ``payments``); None for the rest."""
    aliases: tuple[str, ...] = ()
    recognise: tuple[str, ...] = ()
    """Header names that say this provider sent a request (lowercase; unique across the catalog)."""
    event_type: Where = Where()
    idempotency: Where | None = None
    scheme: Scheme
    handshake: Handshake | None = None
    sample: SampleSpec | None = None
    proof: str
    """How its test proves the scheme: ``library:<package>`` (the provider's own library signs or verifies),
    ``community:<package>`` (the provider publishes neither library nor example, and the maintained community
    library its developers use verifies),
    ``example`` (the provider's published example request, :attr:`example`, verifies at the edge) or
    ``documented`` (only the documented rule, as the catalog's own signer reads it)."""
    example: str = ""
    """Where the provider publishes the worked example (secret, request, signature) its test replays, kept
    in tests/data/provider_examples; also set beside a library proof."""
    docs: str = ""
