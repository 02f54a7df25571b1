"""The catalog's signature checks: one class per scheme kind, its parameters from the provider's entry.

Apart from ``shared.signatures`` (the four spec kinds, with their compiled path) because these are data
driven: an HMAC over a template of the timestamp, id, URL, method, form and body, in hex, base64 or
base64url, behind a prefix, in a ``key=value`` items header or not; Ed25519 and ECDSA P-256 with the
provider's public key (``cryptography``, not our own curve code); a shared token or Basic credentials. Every
comparison is constant time. Reasons are those of ``shared.signatures`` and the verdict's ``scheme`` is the
provider's name. A check is built once per endpoint and provider (:func:`check_for`), never per request.

Order, as for the four kinds: a missing header (or id/timestamp header), a malformed one, a malformed
timestamp, then the signature, and only for a genuine signature the tolerance (a forged old request reads
``signature_mismatch``, never ``timestamp_out_of_tolerance``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
import warnings
from datetime import datetime
from typing import Final
from urllib.parse import parse_qs, urlsplit

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from shared.bytes_lru import memoize
from shared.headers import RawHeaders
from shared.providers.catalog import CATALOG
from shared.providers.model import Provider, Scheme
from shared.providers.values import Body, text_of, walk
from shared.signatures.schemes import (
    MALFORMED_HEADER,
    MALFORMED_TIMESTAMP,
    MISSING_HEADER,
    SIGNATURE_MISMATCH,
    TIMESTAMP_OUT_OF_TOLERANCE,
    Verdict,
)

__all__ = ("CatalogCheck", "check_for", "public_key", "signed_message")

_REASONS: Final = (
    MISSING_HEADER,
    MALFORMED_HEADER,
    MALFORMED_TIMESTAMP,
    SIGNATURE_MISMATCH,
    TIMESTAMP_OUT_OF_TOLERANCE,
)
_TEMPLATE: Final = re.compile(r"\{(body|timestamp|id|url|method|form|body:[^{}]+)\}")
_ISO_FRACTION: Final = re.compile(r"(\.\d{6})\d+")


class Request:
    """What a check may read of one request; ``url`` is the public URL the provider posted to."""

    __slots__ = ("body", "headers", "method", "url")

    def __init__(self, headers: RawHeaders, body: Body, method: str = "POST", url: str = "") -> None:
        self.headers = headers
        self.body = body
        self.method = method
        self.url = url


def _parts(template: str) -> tuple[tuple[bool, str], ...]:
    """(is a field, text) pieces of a ``signed`` template."""
    pieces: list[tuple[bool, str]] = []
    at = 0
    for match in _TEMPLATE.finditer(template):
        if match.start() > at:
            pieces.append((False, template[at : match.start()]))
        pieces.append((True, match.group(1)))
        at = match.end()
    if at < len(template):
        pieces.append((False, template[at:]))
    return tuple(pieces)


def signed_message(scheme: Scheme, request: Request, timestamp: bytes, msg_id: bytes) -> bytes:
    """The bytes a provider signs for this request under ``scheme``'s template."""
    out: list[bytes] = []
    for field, text in _parts(scheme.signed):
        if not field:
            out.append(text.encode())
        elif text == "body":
            out.append(request.body.raw)
        elif text == "timestamp":
            out.append(timestamp)
        elif text == "id":
            out.append(msg_id)
        elif text == "url":
            out.append(request.url.encode())
        elif text == "method":
            out.append(request.method.upper().encode())
        elif text.startswith("body:"):
            out.append(text_of(walk(request.body.value, text[5:])).encode("utf-8", "surrogatepass"))
        else:  # form: Twilio's rule, each distinct (name, value) sorted, name then value
            out.extend((name + value).encode() for name, value in sorted(set(request.body.form() or ())))
    return b"".join(out)


def _seconds(text: bytes, unit: str) -> float | None:
    try:
        raw = text.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if unit == "iso":
        try:
            return datetime.fromisoformat(_ISO_FRACTION.sub(r"\1", raw).replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if not raw.isdigit() or len(raw) > 20:
        return None
    return int(raw) / (1000 if unit == "ms" else 1)


def _encode(mac: bytes, encoding: str) -> bytes:
    if encoding == "hex":
        return mac.hex().encode()
    if encoding == "base64":
        return base64.b64encode(mac)
    return base64.urlsafe_b64encode(mac).rstrip(b"=")


def _decode(text: bytes, encoding: str) -> bytes | None:
    try:
        if encoding == "hex":
            return bytes.fromhex(text.decode("ascii"))
        if encoding == "base64url":
            return base64.urlsafe_b64decode(text + b"=" * (-len(text) % 4))
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def hmac_key(scheme: Scheme, secret: str) -> bytes:
    """The HMAC key a provider derives from the secret it shows (hex, base64, Svix's ``whsec_``, or text)."""
    raw = secret.encode("utf-8", "surrogatepass")
    try:
        if scheme.key == "hex":
            return bytes.fromhex(secret)
        if scheme.key == "base64":
            return base64.b64decode(secret)
        if scheme.key == "sha1":
            return hashlib.sha1(raw).digest()  # noqa: S324 - Braintree's key derivation, not a choice of ours
        if scheme.key == "whsec" and secret.startswith("whsec_"):
            return base64.b64decode(secret[6:] + "==") or raw
    except (ValueError, binascii.Error):
        pass
    return raw


def public_key(kind: str, text: str) -> ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey:
    """A provider's public key as PEM, or in its own encoding: hex or base64 of the raw Ed25519 key
    (Discord, Telnyx), base64 of the DER key (SendGrid). ``ValueError`` when it is none of those."""
    try:
        return _public_key(kind, text.strip())
    except (UnsupportedAlgorithm, TypeError) as exc:
        raise ValueError(f"not a public key this scheme uses ({exc})") from None


def _public_key(kind: str, text: str) -> ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey:
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_public_key(text.encode())
    else:
        raw = _decode(text.encode(), "hex") if len(text) == 64 else None
        raw = raw if raw is not None else _decode(text.encode(), "base64")
        if raw is None:
            raise ValueError("not PEM, hex or base64")
        if kind == "ed25519" and len(raw) == 32:
            return ed25519.Ed25519PublicKey.from_public_bytes(raw)
        key = serialization.load_der_public_key(raw)
    if kind == "ed25519" and isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if kind != "ed25519" and isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
        return key
    raise ValueError(f"not an {'Ed25519' if kind == 'ed25519' else 'ECDSA P-256'} public key")


class CatalogCheck:
    """One provider's check with one secret (or public key), ready before any request."""

    __slots__ = ("_key", "_public", "_verdicts", "needs_url", "provider", "scheme")

    def __init__(self, provider: Provider, secret: str) -> None:
        self.provider = provider
        self.scheme = scheme = provider.scheme
        self.needs_url = "{url}" in scheme.signed or scheme.body_hash_query is not None
        self._key = hmac_key(scheme, secret) if scheme.kind == "hmac" else secret.encode("utf-8", "surrogatepass")
        self._public = None
        if scheme.kind in ("ed25519", "ecdsa_p256"):
            try:
                self._public = public_key(scheme.kind, secret)
            except ValueError:  # refused at auth-config; a key stored before then never verifies anything
                self._public = None
        self._verdicts = {reason: Verdict(reason is None, reason, provider.name) for reason in (None, *_REASONS)}

    def __call__(self, request: Request, now: float | None = None) -> Verdict:
        scheme = self.scheme
        if scheme.kind in ("token", "basic"):
            return self._token(request)
        if scheme.kind == "jws":
            return self._jws(request)
        if scheme.signature_body is not None:
            in_body = text_of(walk(request.body.value, scheme.signature_body))
            value = in_body.encode("utf-8", "surrogatepass") if in_body else None
        else:
            value = request.headers.get(scheme.header.encode()) if scheme.header else None
        if not value or value.isspace():
            return self._verdicts[MISSING_HEADER]
        timestamp = b""
        if scheme.items is not None:
            found = _items(value.strip(), scheme)
            if found is None:
                return self._verdicts[MALFORMED_HEADER]
            timestamp, signatures = found
        else:
            parts = value.split(scheme.several.encode()) if scheme.several else [value]
            prefix = scheme.prefix.encode()
            if scheme.label:  # label|signature: the label (Braintree's public key) is not what is checked
                parts = [p.rpartition(scheme.label.encode())[2] for p in parts if scheme.label.encode() in p]
            signatures = [p.strip()[len(prefix) :] for p in parts if p.strip().startswith(prefix)]
            if not signatures:
                return self._verdicts[MALFORMED_HEADER]
            if scheme.timestamp_header:
                timestamp = request.headers.get(scheme.timestamp_header.encode(), b"").strip()
                if not timestamp:
                    return self._verdicts[MISSING_HEADER]
            elif scheme.timestamp_body:
                timestamp = text_of(walk(request.body.value, scheme.timestamp_body)).encode()
                if not timestamp:
                    return self._verdicts[MISSING_HEADER]
        msg_id = b""
        if scheme.id_header:
            msg_id = request.headers.get(scheme.id_header.encode(), b"").strip()
            if not msg_id:
                return self._verdicts[MISSING_HEADER]
        seconds = _seconds(timestamp, scheme.timestamp_unit) if timestamp else None
        if timestamp and seconds is None:
            return self._verdicts[MALFORMED_TIMESTAMP]
        message = signed_message(scheme, request, timestamp, msg_id)
        if not self._matches(message, signatures) or not _body_bound(scheme, request):
            return self._verdicts[SIGNATURE_MISMATCH]
        tolerance = scheme.tolerance_s
        if (
            seconds is not None
            and tolerance is not None
            and abs((time.time() if now is None else now) - seconds) > tolerance
        ):
            return self._verdicts[TIMESTAMP_OUT_OF_TOLERANCE]
        return self._verdicts[None]

    def _matches(self, message: bytes, signatures: list[bytes]) -> bool:
        scheme = self.scheme
        if scheme.kind == "hmac":
            expected = _encode(hmac.new(self._key, message, scheme.algorithm).digest(), scheme.encoding)
            if scheme.encoding == "hex":
                return any(hmac.compare_digest(sig.lower(), expected) for sig in signatures)
            if scheme.encoding == "base64url":
                return any(hmac.compare_digest(sig.rstrip(b"="), expected) for sig in signatures)
            return any(hmac.compare_digest(sig, expected) for sig in signatures)
        if self._public is None:
            return False
        for text in signatures:
            signature = _decode(text, scheme.encoding)
            if signature is None:
                continue
            try:
                if isinstance(self._public, ed25519.Ed25519PublicKey):
                    self._public.verify(signature, message)
                else:
                    self._public.verify(signature, message, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                continue
            return True
        return False

    def _jws(self, request: Request) -> Verdict:
        """A JWS (HS256) whose claims vouch for the body by its hash (Netlify): checked with PyJWT."""
        import jwt  # only endpoints of such a provider pay for the import

        scheme = self.scheme
        value = request.headers.get((scheme.header or "").encode())
        if not value or value.isspace():
            return self._verdicts[MISSING_HEADER]
        try:
            with warnings.catch_warnings():  # the secret is the one the user gave the provider, short or not
                warnings.simplefilter("ignore", jwt.warnings.InsecureKeyLengthWarning)
                claims = jwt.decode(
                    value.strip().decode("ascii"),
                    self._key,
                    algorithms=["HS256"],
                    issuer=scheme.issuer,
                    options={"require": ["iss", scheme.body_hash_claim] if scheme.issuer else [scheme.body_hash_claim]},
                )
        except UnicodeDecodeError:
            return self._verdicts[MALFORMED_HEADER]
        except jwt.DecodeError as exc:
            bad_signature = isinstance(exc, jwt.InvalidSignatureError)
            return self._verdicts[SIGNATURE_MISMATCH if bad_signature else MALFORMED_HEADER]
        except jwt.InvalidTokenError:  # a genuine token for another issuer, expired, or missing a claim
            return self._verdicts[SIGNATURE_MISMATCH]
        given = claims.get(scheme.body_hash_claim)
        expected = hashlib.sha256(request.body.raw).hexdigest()
        ok = isinstance(given, str) and hmac.compare_digest(given.lower().encode(), expected.encode())
        return self._verdicts[None if ok else SIGNATURE_MISMATCH]

    def _token(self, request: Request) -> Verdict:
        scheme = self.scheme
        if scheme.body_token is not None:
            found = walk(request.body.value, scheme.body_token)
            if not isinstance(found, str) or not found:
                return self._verdicts[MISSING_HEADER]
            given = found.encode("utf-8", "surrogatepass")
        else:
            value = request.headers.get((scheme.header or "").encode())
            if not value or value.isspace():
                return self._verdicts[MISSING_HEADER]
            given = value.strip()
            prefix = scheme.prefix.encode()
            if prefix:
                if given[: len(prefix)].lower() != prefix.lower():
                    return self._verdicts[MALFORMED_HEADER]
                given = given[len(prefix) :].strip()
            if scheme.kind == "basic":
                decoded = _decode(given, "base64")
                if decoded is None or b":" not in decoded:
                    return self._verdicts[MALFORMED_HEADER]
                # A secret without a colon is the password alone, whatever the user name.
                given = decoded if b":" in self._key else decoded.partition(b":")[2]
        ok = hmac.compare_digest(hashlib.sha256(given).digest(), hashlib.sha256(self._key).digest())
        return self._verdicts[None if ok else SIGNATURE_MISMATCH]


def _body_bound(scheme: Scheme, request: Request) -> bool:
    """Whether the body is the one the signed URL's hash parameter names (Twilio's ``bodySHA256``): required
    for a body that is not a form (the template then signs the URL alone), checked whenever present."""
    name = scheme.body_hash_query
    if name is None:
        return True
    given = parse_qs(urlsplit(request.url).query, keep_blank_values=True).get(name)
    if not given:
        return request.body.form() is not None
    expected = hashlib.sha256(request.body.raw).hexdigest().encode()
    return len(given) == 1 and hmac.compare_digest(given[0].lower().encode("utf-8", "replace"), expected)


def _items(value: bytes, scheme: Scheme) -> tuple[bytes, list[bytes]] | None:
    """(timestamp, signatures) of a ``t=..,v1=..`` header; None when either is missing."""
    items = scheme.items
    assert items is not None
    timestamp: bytes | None = None
    signatures: list[bytes] = []
    # Several signatures of a rotation may also come space separated (Persona): both separate items.
    for item in re.split(rb"[%s\s]+" % re.escape(items.separator.encode()), value):
        key, _, text = item.strip().partition(items.pair.encode())
        if key == items.signature.encode() and text:
            signatures.append(text)
        elif key == items.timestamp.encode() and timestamp is None:
            timestamp = text
    if not timestamp or not signatures:
        return None
    return timestamp, signatures


@memoize(8 * 1024 * 1024, size=lambda _check: 1024)  # the secret weighs in the key; a check keeps its MAC or key
def check_for(provider_name: str, secret: str) -> CatalogCheck:
    """The check of ``provider_name`` (a catalog name) with ``secret``, cached per pair like the MAC states:
    bounded in bytes, as every cache an endpoint's configuration fills."""
    return CatalogCheck(CATALOG[provider_name], secret)
