"""A destination's authentication (``auth``) and private CA (``tls_ca``): checked on write, sealed, shown.

What is stored: ``auth_type``, ``auth_shown`` (what reads show: the type and the fields that are not
secret), ``auth_sealed`` (the whole configuration as JSON, sealed: ``control.support.sealing``), ``tls_ca``
(public material, clear) and ``auth_version`` (new on every write of either, the key deliver workers keep
what they built by). Secrets are never returned, logged or put in an error message: a message names the
field and says what is wrong with it, never its value.

A URL's ``user:pass@`` is taken as ``auth`` of type ``basic`` (percent-decoded, as curl and browsers send it)
and the URL is stored without it: it used to be stored and shown as it was, and never sent.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

from control.db.context import Context
from control.delivery.auth.tls import certificate_info, check_ca, check_client_certificate
from control.records.destination_auth import (
    AuthShown,
    BasicAuth,
    BearerAuth,
    DestinationAuth,
    HeaderAuth,
    OAuth2ClientCredentials,
    TlsCaShown,
)
from control.records.destinations import RESERVED_HEADERS, RESERVED_PREFIX
from control.records.storable import check_text
from control.support import sealing
from control.support.url_checks import check_outbound_url
from shared.errors import ValidationError

__all__ = (
    "auth_columns",
    "check_auth",
    "check_https",
    "check_tls_ca",
    "credentials_in_url",
    "new_auth_version",
    "shown_auth",
    "shown_tls_ca",
)

_SIGNATURE_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
_encode = msgspec.json.Encoder().encode


def credentials_in_url(url: str, where: str = "url") -> tuple[str, BasicAuth | None]:
    """The URL without its user info, and that user info as Basic credentials (None when it has none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    auth = BasicAuth(username=unquote(username), password=unquote(password))
    if not auth.username:
        raise ValidationError(f"{where}: user info without a user name (user:password@host)")
    if ":" in auth.username:
        raise ValidationError(f"{where}: the user name must not contain ':' (RFC 7617)")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), auth


def check_https(url: str, *, mtls: bool, tls_ca: bool) -> None:
    """TLS settings need an https URL: refused naming the setting otherwise."""
    if urlsplit(url).scheme.lower() == "https":
        return
    if mtls:
        raise ValidationError("auth: type mtls presents a TLS client certificate, so the url must be https")
    if tls_ca:
        raise ValidationError("tls_ca: the server's certificate is checked only over TLS, so the url must be https")


def check_auth(auth: DestinationAuth, egress: str) -> dict[str, Any]:
    """What reads show of ``auth`` (``auth_shown``), once every field is known to be usable; ValidationError
    naming the field otherwise. ``egress`` is the policy a token endpoint is reached under."""
    for field in auth.__struct_fields__:
        check_text(getattr(auth, field), f"auth.{field}")
    if isinstance(auth, BasicAuth):
        if ":" in auth.username:
            raise ValidationError("auth.username: must not contain ':' (RFC 7617)")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in auth.username + auth.password):
            raise ValidationError("auth: username and password must not contain control characters")
        return {"type": "basic", "username": auth.username}
    if isinstance(auth, BearerAuth):
        return {"type": "bearer"}
    if isinstance(auth, HeaderAuth):
        name = auth.name.lower()
        if name in RESERVED_HEADERS or name.startswith(RESERVED_PREFIX) or name in _SIGNATURE_HEADERS:
            raise ValidationError(f"auth.name: {name} is set by hookyard on every delivery and cannot carry auth")
        return {"type": "header", "name": name}
    if isinstance(auth, OAuth2ClientCredentials):
        check_outbound_url(auth.token_url, egress, where="auth.token_url")
        if "@" in urlsplit(auth.token_url).netloc:
            raise ValidationError("auth.token_url: no user info; the client authenticates with client_secret")
        return {
            "type": "oauth2_client_credentials",
            "token_url": auth.token_url,
            "client_id": auth.client_id,
            "scope": auth.scope,
            "audience": auth.audience,
            "client_auth": auth.client_auth,
        }
    certificate = check_client_certificate(auth.certificate, auth.private_key)
    return {"type": "mtls", "certificate": msgspec.to_builtins(certificate)}


def check_tls_ca(pem: str) -> str:
    check_text(pem, "tls_ca")
    check_ca(pem)
    return pem


def auth_columns(
    ctx: Context, destination_id: str, auth: DestinationAuth | None, shown: dict[str, Any] | None
) -> dict[str, Any]:
    """The columns that store ``auth`` (checked already: ``shown`` is what ``check_auth`` gave), sealed."""
    return {
        "auth_type": None if shown is None else shown["type"],
        "auth_shown": shown,
        "auth_sealed": None
        if auth is None
        else sealing.seal_destination_auth(ctx, destination_id, _encode(auth).decode("utf-8")),
    }


def new_auth_version() -> str:
    """A new ``auth_version``: deliver workers build what they send with anew for it."""
    return secrets.token_hex(12)


def shown_auth(stored: Mapping[str, Any] | None) -> AuthShown | None:
    return None if stored is None else msgspec.convert(stored, AuthShown)


def shown_tls_ca(pem: str | None) -> TlsCaShown | None:
    if pem is None:
        return None
    try:
        return msgspec.convert({"certificates": check_ca(pem)}, TlsCaShown)
    except ValidationError:  # expired since it was stored: shown as it is, without the check
        from cryptography import x509  # here: the rare path; its import costs every start (control.delivery.auth.tls)

        certificates = x509.load_pem_x509_certificates(pem.encode("utf-8"))
        return msgspec.convert({"certificates": [certificate_info(c) for c in certificates]}, TlsCaShown)
