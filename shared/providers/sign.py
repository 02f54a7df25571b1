"""Signing as a catalog provider signs: the sample generator's (``send_test_webhook``, ``hookyard trigger``)
and the tests' second opinion beside each provider's own library.

Next to the checks (``verify``), reading the same scheme parameters and the same ``signed_message``, so the
two cannot drift apart; each provider's test then proves the pair against that provider's own library or
published example. Public-key schemes sign with a private key (``private_key``), which only a test holds:
hookyard stores the provider's public key, so its samples of those providers go unsigned.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import warnings
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

import msgspec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from shared.providers.model import Provider
from shared.providers.values import Body, put
from shared.providers.verify import Request, hmac_key, signed_message

__all__ = ("posted_url", "sign", "sign_body")


def _timestamp(unit: str, now: float) -> str:
    if unit == "ms":
        return str(int(now * 1000))
    if unit == "iso":
        return datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(int(now))


def _encode(signature: bytes, encoding: str) -> str:
    if encoding == "hex":
        return signature.hex()
    if encoding == "base64url":
        return base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
    return base64.b64encode(signature).decode()


def posted_url(provider: Provider, url: str, body: bytes, headers: dict[str, str] | None = None) -> str:
    """The URL the provider posts ``body`` to when given ``url``: with its body hash parameter added for a body
    that is not a form (Twilio's ``?bodySHA256=`` on a JSON body), else ``url`` itself."""
    name = provider.scheme.body_hash_query
    raw = {key.lower().encode(): value.encode() for key, value in (headers or {}).items()}
    if name is None or Body(raw, body).form() is not None:
        return url
    return f"{url}{'&' if '?' in url else '?'}{name}={hashlib.sha256(body).hexdigest()}"


def sign(
    provider: Provider,
    body: bytes,
    secret: str | None,
    *,
    headers: dict[str, str] | None = None,
    url: str = "",
    method: str = "POST",
    now: float | None = None,
    msg_id: str | None = None,
    private_key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | None = None,
) -> dict[str, str]:
    """The headers that make ``body`` verify as ``provider`` sends it (lowercase names). ``headers`` are the
    request's others (a form body's content type); ``url`` the public URL, for schemes that sign it (the
    signature is then over :func:`posted_url`, where the request must be sent)."""
    scheme = provider.scheme
    if scheme.kind == "token":
        return {} if scheme.header is None or secret is None else {scheme.header: scheme.prefix + secret}
    if scheme.kind == "basic":
        credentials = secret if secret is None or ":" in secret else "hookyard:" + secret
        return {} if credentials is None else {scheme.header or "authorization": "Basic " + _b64(credentials)}
    if scheme.kind == "builtin":
        raise ValueError(f"{provider.name} is signed by shared.signatures.sign")
    if scheme.signature_body is not None:
        return {}  # signed inside the body: sign_body
    if scheme.kind == "jws":
        if secret is None:
            return {}
        import jwt

        claims = {"iss": scheme.issuer, scheme.body_hash_claim: hashlib.sha256(body).hexdigest()}
        with warnings.catch_warnings():  # the user's secret, as short as they made it
            warnings.simplefilter("ignore", jwt.warnings.InsecureKeyLengthWarning)
            return {scheme.header or "": jwt.encode(claims, secret, algorithm="HS256")}
    now = time.time() if now is None else now
    out: dict[str, str] = {}
    timestamp = _timestamp(scheme.timestamp_unit, now)
    if scheme.timestamp_header:
        out[scheme.timestamp_header] = timestamp
    if scheme.id_header:
        out[scheme.id_header] = msg_id or f"msg_{int(now * 1000)}"
    raw = {name.lower().encode(): value.encode() for name, value in {**(headers or {}), **out}.items()}
    request = Request(raw, Body(raw, body), method, posted_url(provider, url, body, headers))
    message = signed_message(scheme, request, timestamp.encode(), out.get(scheme.id_header or "", "").encode())
    if scheme.kind == "hmac":
        if secret is None:
            return out
        signature = hmac.new(hmac_key(scheme, secret), message, scheme.algorithm).digest()
    elif private_key is None:
        return {}
    elif isinstance(private_key, ed25519.Ed25519PrivateKey):
        signature = private_key.sign(message)
    else:
        signature = private_key.sign(message, ec.ECDSA(hashes.SHA256()))
    text = _encode(signature, scheme.encoding)
    items = scheme.items
    value = (
        f"{items.timestamp}{items.pair}{timestamp}{items.separator}{items.signature}{items.pair}{text}"
        if items is not None
        else scheme.prefix + text
    )
    out[scheme.header or ""] = value
    return out


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


def sign_body(provider: Provider, body: bytes, secret: str, *, form: bool = False, now: float | None = None) -> bytes:
    """``body`` (JSON, or a form with ``form``) with its signature written where a provider that signs inside
    the body puts it (``signature_body``), and its timestamp (``timestamp_body``) set to ``now``."""
    scheme = provider.scheme
    assert scheme.kind == "hmac"
    assert scheme.signature_body is not None
    value = dict(parse_qsl(body.decode(), keep_blank_values=True)) if form else msgspec.json.decode(body)
    if scheme.timestamp_body is not None:
        put(value, scheme.timestamp_body, _timestamp(scheme.timestamp_unit, time.time() if now is None else now))

    def encoded() -> bytes:
        return urlencode(value).encode() if form else msgspec.json.encode(value)

    raw = {b"content-type": b"application/x-www-form-urlencoded" if form else b"application/json"}
    message = signed_message(scheme, Request(raw, Body(raw, encoded())), b"", b"")
    signature = _encode(hmac.new(hmac_key(scheme, secret), message, scheme.algorithm).digest(), scheme.encoding)
    put(value, scheme.signature_body, f"hookyard{scheme.label}{signature}" if scheme.label else signature)
    return encoded()
