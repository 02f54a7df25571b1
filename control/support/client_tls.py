"""The TLS trust our HTTP clients are made with (``verify=``), built only for a URL that needs it.

An ``httpx`` client builds its TLS context when it is made, whatever it will talk to: the CA bundle loaded,
20-50 ms of CPU. Every ``hookyard`` command paid it (~40 ms), also against the plain-HTTP control plane
``hookyard up`` serves, and the tests run the command hundreds of times (ADR 0043). ``verify_for`` gives an
https URL the same trust as before (httpx's own context: certifi's bundle, or
``SSL_CERT_FILE``/``SSL_CERT_DIR`` for a client that reads the environment), built once per process; any other
URL a context that trusts no CA at all, with verification on. A plain-HTTP client never uses it, and an https
URL reached through it anyway (a redirect, a control plane that moved) fails verification rather than being
let through.

The contexts are shared between clients. httpcore sets a context's ALPN list on each connection from the
client's ``http2`` flag; every client of ours is HTTP/1.1 only, so they all set the same one.
"""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ("trust_none", "trusted", "verify_for")


@functools.cache
def trusted(trust_env: bool = False) -> ssl.SSLContext:
    """What ``httpx`` builds for ``verify=True``; ``trust_env`` as the client's own (True: the environment's
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` before certifi's bundle)."""
    return httpx.create_ssl_context(verify=True, trust_env=trust_env)


@functools.cache
def trust_none() -> ssl.SSLContext:
    """Verification on (certificate and host name required), no CA loaded: no server's certificate passes.
    Under a millisecond to build, where loading a bundle is tens."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def verify_for(*urls: str, trust_env: bool = False) -> ssl.SSLContext:
    """The ``verify=`` for a client that talks to ``urls``: ``trusted`` if one of them is https, else
    ``trust_none``. ``trust_env``: the client's own."""
    if any(url.lower().startswith("https://") for url in urls):
        return trusted(trust_env)
    return trust_none()
