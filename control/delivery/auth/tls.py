"""A destination's own TLS settings: the CA its certificate must chain to (``tls_ca``) and the client
certificate it is shown (``mtls``), as an ``ssl.SSLContext`` the transport connects with.

Python's ``ssl`` loads a certificate chain only from a file. The key is never written to disk for that: it
goes to an anonymous in-memory file (``memfd_create``, Linux) read through ``/proc/self/fd``; elsewhere a
private temporary file that is removed at once. Contexts are built once per distinct setting and kept in a
bounded cache (each holds a CA store in OpenSSL's memory, a few hundred KB with the system's CAs).

The same parsing checks what the API is given (``check_*``): a PEM that does not parse, a key that does not
match its certificate, an encrypted key, an expired certificate are refused naming the field, and the
context is built once as the deliveries will build it, so what is stored is known to work. What is wrong is
said in our words (``_fault``): the parser's own text is Rust debug output (``ParseError { kind: ShortData
... }``) that tells a user nothing, and nothing of what was given is echoed (a private key is a secret).
"""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
from cryptography.hazmat.primitives import hashes, serialization

from control.delivery.transport import TlsProfile
from shared.errors import ValidationError

if TYPE_CHECKING:
    from cryptography import x509

__all__ = ("TlsProfiles", "build_context", "certificate_info", "check_ca", "check_client_certificate", "profile_key")

MAX_PROFILES = 128
"""Contexts kept (each holds a CA store)."""
MAX_PEM_BYTES = 8 * 1024 * 1024
"""PEM text kept in all, whatever the count."""


def _fault(exc: Exception, what: str) -> str:
    """What is wrong with a PEM the parser refused, for ``what`` ("certificate", "private key"), read from
    the parser's error (whose words are not shown: see the module's docstring)."""
    text = str(exc)
    if "MalformedFraming" in text:
        return f"not a PEM {what}: its -----BEGIN and -----END lines are missing or do not pair"
    if "InvalidData" in text or "base64" in text.lower():
        return f"not a PEM {what}: the text between its -----BEGIN and -----END lines is not base64"
    if "ShortData" in text or "short data" in text:
        return f"the PEM {what} is truncated: paste the whole block, -----BEGIN line to -----END line"
    if "no BEGIN/END delimiters" in text:
        return f"a PEM block, but not a {what} (its -----BEGIN line names another kind)"
    if "unsupported" in text.lower() and "parsing error" not in text:
        return f"not a {what} hookyard can use (RSA, EC on a named curve, Ed25519 or Ed448, unencrypted)"
    return f"not a PEM {what}: the base64 between its -----BEGIN and -----END lines does not decode to one"


def _certificates(pem: str, field: str) -> list[x509.Certificate]:
    # x509 here, not at the top: only a destination with TLS settings needs it, and the control plane and
    # every `hookyard worker` imported it at start (issue 44: start-up CPU).
    from cryptography import x509

    if "-----BEGIN CERTIFICATE-----" not in pem:
        raise ValidationError(f"{field}: no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)")
    try:
        certificates = x509.load_pem_x509_certificates(pem.encode("utf-8"))
    except ValueError as exc:
        raise ValidationError(f"{field}: {_fault(exc, 'certificate')}") from None
    now = datetime.now(UTC)
    for i, certificate in enumerate(certificates):
        if certificate.not_valid_after_utc < now:
            where = field if len(certificates) == 1 else f"{field} (certificate {i + 1})"
            raise ValidationError(f"{where}: expired on {certificate.not_valid_after_utc.isoformat()}")
    return certificates


def certificate_info(certificate: x509.Certificate) -> dict[str, Any]:
    """What the API shows of a certificate (``control.records.destination_auth.CertificateInfo``)."""
    return {
        "subject": certificate.subject.rfc4514_string(),
        "issuer": certificate.issuer.rfc4514_string(),
        "not_before": certificate.not_valid_before_utc,
        "not_after": certificate.not_valid_after_utc,
        "fingerprint_sha256": certificate.fingerprint(hashes.SHA256()).hex(),
    }


def check_ca(pem: str, field: str = "tls_ca") -> list[dict[str, Any]]:
    """The bundle's certificates as the API shows them; ValidationError naming ``field`` when it does not
    parse or cannot verify anything."""
    certificates = _certificates(pem, field)
    try:
        build_context(pem, None, None)
    except (ssl.SSLError, ValueError):
        raise ValidationError(f"{field}: its certificates parse but OpenSSL cannot verify with them") from None
    return [certificate_info(c) for c in certificates]


def check_client_certificate(certificate: str, private_key: str, field: str = "auth") -> dict[str, Any]:
    """The client certificate as the API shows it, once chain and key parse, match and load as a TLS client
    certificate; ValidationError naming ``auth.certificate`` or ``auth.private_key`` otherwise."""
    chain = _certificates(certificate, f"{field}.certificate")
    try:
        key = serialization.load_pem_private_key(private_key.encode("utf-8"), password=None)
    except TypeError:
        raise ValidationError(
            f"{field}.private_key: encrypted keys are not taken; give it unencrypted (it is sealed at rest)"
        ) from None
    except (ValueError, UnicodeError) as exc:
        raise ValidationError(f"{field}.private_key: {_fault(exc, 'private key')}") from None
    public = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*public) != chain[0].public_key().public_bytes(*public):
        raise ValidationError(
            f"{field}.private_key: the key does not match the certificate (the chain's first): give the key "
            "that certificate was issued for"
        )
    try:
        build_context(None, certificate, private_key)
    except (ssl.SSLError, ValueError, OSError):
        raise ValidationError(
            f"{field}.certificate: the certificate and key parse and match, but OpenSSL cannot present them as a "
            "TLS client certificate"
        ) from None
    return certificate_info(chain[0])


def _load_chain(context: ssl.SSLContext, certificate: str, private_key: str) -> None:
    """``load_cert_chain`` from memory: the chain and key in one anonymous file, never on disk."""
    data = (certificate.strip() + "\n" + private_key.strip() + "\n").encode("utf-8")
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("hookyard-client-certificate", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            context.load_cert_chain(f"/proc/self/fd/{fd}", password=b"")
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="hookyard-", suffix=".pem")  # 0600, removed at once
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        context.load_cert_chain(path, password=b"")
    finally:
        os.unlink(path)


def build_context(ca: str | None, certificate: str | None, private_key: str | None) -> ssl.SSLContext:
    """A client context verifying host names against ``ca`` (else the system's CAs, as every delivery) and
    presenting ``certificate`` with ``private_key`` when given."""
    if ca is not None:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
    else:
        context = httpx.create_ssl_context(trust_env=False)
    if certificate is not None and private_key is not None:
        _load_chain(context, certificate, private_key)
    return context


def profile_key(ca: str | None, certificate: str | None, private_key: str | None) -> str:
    digest = hashlib.sha256()
    for part in (ca, certificate, private_key):
        digest.update(b"\x00" if part is None else b"\x01" + part.encode("utf-8") + b"\x00")
    return digest.hexdigest()


class TlsProfiles:
    """Contexts by setting, the least recently used dropped past ``MAX_PROFILES`` or ``MAX_PEM_BYTES``.
    A dropped context lives on in the connections made with it; a new one is built on the next use."""

    def __init__(self, *, max_profiles: int = MAX_PROFILES, max_bytes: int = MAX_PEM_BYTES) -> None:
        self.max_profiles, self.max_bytes = max_profiles, max_bytes
        self._kept: OrderedDict[str, tuple[TlsProfile, int]] = OrderedDict()
        self.bytes = 0

    def get(self, ca: str | None, certificate: str | None, private_key: str | None) -> TlsProfile | None:
        """The profile of these settings; None when there are none (the transport's default context)."""
        if ca is None and certificate is None:
            return None
        key = profile_key(ca, certificate, private_key)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept[0]
        profile = TlsProfile(key=key, context=build_context(ca, certificate, private_key))
        size = sum(len(p) for p in (ca, certificate, private_key) if p is not None)
        self._kept[key] = (profile, size)
        self.bytes += size
        while len(self._kept) > self.max_profiles or (self.bytes > self.max_bytes and len(self._kept) > 1):
            _, (_, dropped) = self._kept.popitem(last=False)
            self.bytes -= dropped
        return profile
