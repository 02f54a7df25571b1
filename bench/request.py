"""The signed request every edge bench sends: a payments event, as the real provider signs it.

Its own module so that a bench child process (``bench.instructions`` under valgrind) imports nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time

__all__ = ("SECRET", "payload")

SECRET = "whsec_benchsecretbenchsecretbenchsecret"


def payload() -> tuple[bytes, dict[str, str]]:
    """(body, headers) with a ``stripe-signature`` made now."""
    body = json.dumps(
        {"id": "evt_1NG8Du2eZvKYlo2C", "type": "payment_intent.succeeded", "data": {"amount": 2000}},
        separators=(",", ":"),
    ).encode()
    t = int(time.time())
    mac = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return body, {"content-type": "application/json; charset=utf-8", "stripe-signature": f"t={t},v1={mac}"}
