"""A local app as a developer writes one: a webhook route that verifies each request with the provider's
official library (or, where there is none, the provider's documented check) and its secret, and answers 200
only when it verifies, 401 otherwise. A real HTTP server on a loopback port, in a thread.

Which check applies is read from the headers the request carries, as an app receiving several providers
does: ``Stripe-Signature`` → ``stripe.Webhook.construct_event``; ``svix-*`` → ``svix.Webhook.verify``;
``webhook-*`` → ``standardwebhooks.Webhook.verify``; ``X-Shopify-Hmac-SHA256`` → Shopify's documented check
(base64 HMAC-SHA256 of the raw body with the app's secret); ``X-Hub-Signature-256`` → GitHub's documented
check (``sha256=`` and the hex HMAC-SHA256 of the raw body). Every check that applies must pass.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks
import stripe
import svix

__all__ = ("Checked", "VerifyingApp", "verified_by", "verifying_app")


def _shopify(body: bytes, headers: Mapping[str, str], secret: str) -> None:
    """https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook"""
    expected = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
    if not hmac.compare_digest(expected, headers["x-shopify-hmac-sha256"]):
        raise ValueError("X-Shopify-Hmac-SHA256 does not match")


def _github(body: bytes, headers: Mapping[str, str], secret: str) -> None:
    """https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries"""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, headers["x-hub-signature-256"]):
        raise ValueError("X-Hub-Signature-256 does not match")


def verified_by(body: bytes, headers: Mapping[str, str], secret: str) -> list[str]:
    """The libraries that verified the request (all that apply; none apply: empty). Raises what the
    failing library raises."""
    headers = {name.lower(): value for name, value in headers.items()}
    done = []
    if "stripe-signature" in headers:
        stripe.Webhook.construct_event(body, headers["stripe-signature"], secret)
        done.append("stripe")
    if "svix-signature" in headers:
        svix.Webhook(secret).verify(body, headers)
        done.append("svix")
    if "webhook-signature" in headers:
        standardwebhooks.Webhook(secret).verify(body, headers)
        done.append("standardwebhooks")
    if "x-shopify-hmac-sha256" in headers:
        _shopify(body, headers, secret)
        done.append("shopify")
    if "x-hub-signature-256" in headers:
        _github(body, headers, secret)
        done.append("github")
    return done


@dataclass(frozen=True)
class Checked:
    headers: dict[str, str]
    body: bytes
    libraries: list[str]
    """What verified it; empty when nothing applied or a check failed (``error``)."""
    error: str | None


class VerifyingApp:
    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.received: list[Checked] = []
        self._lock = threading.Lock()
        app = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                try:
                    libraries, error = verified_by(body, headers, app.secret), None
                    if not libraries:
                        error = "no signature this app can check"
                except Exception as exc:  # noqa: BLE001 - every library's refusal is the answer
                    libraries, error = [], f"{type(exc).__name__}: {exc}"
                with app._lock:
                    app.received.append(Checked(headers, body, libraries if error is None else [], error))
                self.send_response(200 if error is None else 401)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhooks"

    def snapshot(self) -> list[Checked]:
        with self._lock:
            return list(self.received)


@contextmanager
def verifying_app(secret: str) -> Iterator[VerifyingApp]:
    app = VerifyingApp(secret)
    thread = threading.Thread(target=app.server.serve_forever, name="verifying-app", daemon=True)
    thread.start()
    try:
        yield app
    finally:
        app.server.shutdown()
        app.server.server_close()
        thread.join(10)
