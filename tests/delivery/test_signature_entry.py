"""A delivery's ``webhook-signature`` entry is made from the identity MAC directly (ADR 0071), not through
``shared.signatures.sign`` and the three headers it builds: the same entry, for every kind of secret."""

from __future__ import annotations

import pytest

from control.delivery.signing import new_ed25519, signature_headers
from shared.signatures import sign


@pytest.mark.parametrize(
    "secret",
    ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "a plain secret", "whsec_"],
)
@pytest.mark.parametrize("msg_id", ["evt_01J0000000000000000000", "evt_é\udcff"])
def test_the_entry_is_the_identity_schemes_signature(secret: str, msg_id: str) -> None:
    body = b'{"a": 1}\xff'
    headers = signature_headers(msg_id, body, (secret,), 1795252711)
    signed = sign("identity", body, secret, msg_id=msg_id, timestamp=1795252711, header_family="standard")
    assert headers == signed


def test_a_rotations_overlap_gives_one_entry_per_secret_in_order() -> None:
    whsec, (whsk, _) = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", new_ed25519()
    one = signature_headers("evt_1", b"x", (whsec,), 17)["webhook-signature"]
    other = signature_headers("evt_1", b"x", (whsk,), 17)["webhook-signature"]
    assert signature_headers("evt_1", b"x", (whsec, whsk), 17)["webhook-signature"] == f"{one} {other}"
    assert other.startswith("v1a,")
