"""What the authentication tests run against: a throwaway CA with server and client certificates (made with
``cryptography`` per test), servers that enforce Basic, Bearer or a header, and an OAuth2 token endpoint that
counts its calls and refuses tokens it no longer honours."""

from __future__ import annotations

import base64
import ipaddress
import secrets
import ssl
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.destination import Destination, Received, Reply

__all__ = ("Pki", "TokenEndpoint", "requiring")

UNAUTHORIZED = Reply(status=401, body=b'{"error":"unauthorized"}')


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@dataclass
class Pki:
    """A CA of the test's own, and certificates it issues."""

    name: str = "hookyard test CA"
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    cert: x509.Certificate = field(init=False)

    def __post_init__(self) -> None:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.name)])
        now = datetime.now(UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, common_name: str, *, server: bool = False, expired: bool = False) -> tuple[str, str]:
        """(certificate PEM, private key PEM): a server certificate for 127.0.0.1 and localhost, or a client one."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        start, end = (
            (now - timedelta(days=3), now - timedelta(days=1))
            if expired
            else (now - timedelta(minutes=5), now + timedelta(days=1))
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key)

    def server_context(self, directory: Path, *, require_client: bool) -> ssl.SSLContext:
        """A server's context with a certificate of this CA; with ``require_client``, a client certificate
        of this CA is required for the handshake to complete."""
        cert, key = self.issue("127.0.0.1", server=True)
        (directory / "server.pem").write_text(cert + key)
        (directory / "ca.pem").write_text(self.pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(directory / "server.pem")
        if require_client:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(directory / "ca.pem")
        return context


def requiring(destination: Destination, name: str, value: str) -> None:
    """The destination answers 401 unless the request has header ``name`` with exactly ``value``."""

    def answer(received: Received) -> Reply | None:
        return None if received.headers.get(name) == value else UNAUTHORIZED

    destination.answer = answer


class TokenEndpoint:
    """An OAuth2 token endpoint (client credentials, client authenticated by HTTP Basic or in the form) on a
    real server, and the resource server check that goes with it: ``protect(destination)`` makes a destination
    answer 401 to any token this endpoint did not issue or no longer honours (``revoke``)."""

    def __init__(self, server: Destination, *, client_id: str, client_secret: str, expires_in: int = 3600) -> None:
        self.server, self.client_id, self.client_secret = server, client_id, client_secret
        self.expires_in = expires_in
        self.calls = 0
        self.refused = 0
        self.valid: set[str] = set()
        self.issued: list[str] = []
        self.forms: list[dict[str, list[str]]] = []
        self._lock = threading.Lock()
        server.answer = self._token

    @property
    def url(self) -> str:
        return self.server.url.replace("/hook", "/oauth/token")

    def _client(self, received: Received, form: dict[str, list[str]]) -> tuple[str, str] | None:
        header = received.headers.get("authorization", "")
        if header.startswith("Basic "):
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            return user, password
        if "client_id" in form:
            return form["client_id"][0], form.get("client_secret", [""])[0]
        return None

    def _token(self, received: Received) -> Reply:
        form = parse_qs(received.body.decode())
        with self._lock:
            self.calls += 1
            self.forms.append(form)
            ok_client = self._client(received, form) == (self.client_id, self.client_secret)
            if received.method != "POST" or form.get("grant_type") != ["client_credentials"] or not ok_client:
                return Reply(status=401, body=b'{"error":"invalid_client","error_description":"who are you"}')
            token = "tok_" + secrets.token_urlsafe(24)
            self.valid.add(token)
            self.issued.append(token)
        body = {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in}
        return Reply(status=200, body=msgspec.json.encode(body), headers={"cache-control": "no-store"})

    def revoke(self) -> None:
        """Every token issued so far is refused from now on (as a server does once they expire)."""
        with self._lock:
            self.valid.clear()

    def protect(self, destination: Destination) -> None:
        def answer(received: Received) -> Reply | None:
            token = received.headers.get("authorization", "").removeprefix("Bearer ")
            with self._lock:
                if token in self.valid:
                    return None
                self.refused += 1
            return UNAUTHORIZED

        destination.answer = answer
