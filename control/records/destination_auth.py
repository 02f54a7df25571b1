"""How hookyard authenticates to a destination (``auth``) and which CA its server must chain to (``tls_ca``).

Two shapes per kind: what a caller writes (secrets included; sealed at rest, never returned) and what every
read shows (the kind and the fields that are not secret). Both are unions tagged by ``type``, so the
OpenAPI document and the MCP schemas list each kind with its own fields. The service checks what these
types cannot say (a PEM that does not parse, a key that does not match its certificate, an https URL for
TLS settings) with a message naming the field: ``control.service.destinations.auth``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from control.records.http import HEADER_NAME, HEADER_VALUE, MAX_HEADER_NAME, Url
from control.records.text import SECRET, SECRET_FIELD, text

__all__ = (
    "AUTH_TYPES",
    "MAX_PEM",
    "AuthShown",
    "BasicAuth",
    "BasicShown",
    "BearerAuth",
    "BearerShown",
    "CertificateInfo",
    "DestinationAuth",
    "HeaderAuth",
    "HeaderShown",
    "MtlsAuth",
    "MtlsShown",
    "OAuth2ClientCredentials",
    "OAuth2Shown",
    "TlsCa",
    "TlsCaShown",
)

AUTH_TYPES = ("basic", "bearer", "header", "oauth2_client_credentials", "mtls")
MAX_PEM = 65_536
"""Longest PEM text taken (a certificate chain, a private key, a CA bundle)."""

_Secret = Annotated[
    str,
    text(
        max_length=4096,
        doc_pattern=SECRET,
        description="Sealed at rest and never returned; no leading or trailing whitespace",
        **SECRET_FIELD,
    ),
]
_HeaderSafe = Annotated[
    str,
    text(
        max_length=4096,
        pattern=HEADER_VALUE,
        doc_pattern=HEADER_VALUE,
        description="Visible ASCII, spaces and tabs (sent in a header); sealed at rest and never returned",
        **SECRET_FIELD,
    ),
]
_Pem = Annotated[str, text(max_length=MAX_PEM, description="PEM text")]
_PrivatePem = Annotated[
    str, text(max_length=MAX_PEM, description="PEM text; sealed at rest, never returned", **SECRET_FIELD)
]
_Word = Annotated[str, text(max_length=1024, doc_pattern=SECRET)]

ClientAuth = Literal["basic", "body"]


class BasicAuth(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type", tag="basic"):
    """HTTP Basic (``authorization: Basic base64(username:password)``). A URL's ``user:pass@`` becomes this."""

    username: Annotated[str, text(max_length=1024, description="Must not contain ':' (RFC 7617)")]
    password: Annotated[
        str,
        msgspec.Meta(max_length=4096, description="Sealed at rest and never returned", extra_json_schema=SECRET_FIELD),
    ]


class BearerAuth(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type", tag="bearer"):
    """A static token: ``authorization: Bearer <token>``."""

    token: _HeaderSafe


class HeaderAuth(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type", tag="header"):
    """One header of the destination's choosing (``x-api-key: ...``), its value sealed like any secret."""

    name: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=MAX_HEADER_NAME,
            pattern=HEADER_NAME,
            description="A header name; not one the delivery sets itself (hop-by-hop, `host`, "
            "`content-length`, `x-hookyard-*`, `webhook-*`)",
        ),
    ]
    value: _HeaderSafe


class OAuth2ClientCredentials(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type", tag="oauth2_client_credentials"
):
    """OAuth 2.0 client credentials (RFC 6749 section 4.4): a token is fetched from ``token_url`` (under the
    egress policy), cached until it expires, and sent as ``authorization: Bearer``; a 401 from the
    destination fetches a new one once."""

    token_url: Url
    client_id: _Word
    client_secret: _Secret
    scope: _Word | None = None
    """Space separated scopes asked for; null: none."""
    audience: _Word | None = None
    """The ``audience`` parameter some servers (Auth0 among them) need; null: not sent."""
    client_auth: ClientAuth = "basic"
    """How the client authenticates to the token endpoint: ``basic`` (HTTP Basic, RFC 6749's default) or
    ``body`` (``client_id`` and ``client_secret`` as form fields)."""


class MtlsAuth(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type", tag="mtls"):
    """A TLS client certificate presented to the destination (its URL must be https)."""

    certificate: _Pem
    """The client certificate first, then any intermediates, PEM."""
    private_key: _PrivatePem
    """The certificate's private key, PEM, unencrypted (it is sealed at rest); never returned."""


DestinationAuth = BasicAuth | BearerAuth | HeaderAuth | OAuth2ClientCredentials | MtlsAuth
TlsCa = Annotated[
    str,
    text(
        max_length=MAX_PEM,
        description="PEM bundle of CA certificates the destination's certificate must chain to, in place of "
        "the system's (a private CA); its URL must be https. `null` clears it.",
    ),
]


class CertificateInfo(msgspec.Struct, kw_only=True):
    """What a read shows of a certificate."""

    subject: str
    """RFC 4514 form, e.g. ``CN=hookyard,O=Example``."""
    issuer: str
    not_before: datetime
    not_after: datetime
    fingerprint_sha256: str
    """Hex, lowercase."""


class BasicShown(msgspec.Struct, kw_only=True, tag_field="type", tag="basic"):
    username: str


class BearerShown(msgspec.Struct, kw_only=True, tag_field="type", tag="bearer"):
    pass


class HeaderShown(msgspec.Struct, kw_only=True, tag_field="type", tag="header"):
    name: str


class OAuth2Shown(msgspec.Struct, kw_only=True, tag_field="type", tag="oauth2_client_credentials"):
    token_url: str
    client_id: str
    scope: str | None
    audience: str | None
    client_auth: ClientAuth


class MtlsShown(msgspec.Struct, kw_only=True, tag_field="type", tag="mtls"):
    certificate: CertificateInfo
    """The client certificate (the chain's first)."""


AuthShown = BasicShown | BearerShown | HeaderShown | OAuth2Shown | MtlsShown


class TlsCaShown(msgspec.Struct, kw_only=True):
    certificates: list[CertificateInfo]
    """The bundle's CA certificates, in the order given."""
