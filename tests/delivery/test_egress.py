"""The outbound transport on its own: TLS, connections the destination closed while idle, and the egress
policy's address ranges (HTTP framing and failures: tests/delivery/test_transport_*.py)."""

from __future__ import annotations

from pathlib import Path

from control.delivery import egress
from control.delivery.send import send
from tests.destination import Destination, serving
from tests.helpers import wait_for


async def test_tls_destinations_are_verified(tmp_path: Path) -> None:
    """A trusted certificate works over a kept-alive connection, an untrusted one is a connection
    failure, never a silent downgrade."""
    with serving(tls_dir=tmp_path) as secure:
        trusted = egress.client(
            "any", timeout_s=2, connect_timeout_s=2, max_connections=2, ssl_context=secure.client_context()
        )
        untrusted = egress.client("any", timeout_s=2, connect_timeout_s=2, max_connections=2)
        async with trusted, untrusted:
            first = await send(trusted, "POST", secure.url, {"content-type": "text/plain"}, b"one", total_timeout_s=5)
            second = await send(trusted, "POST", secure.url, {}, b"two", total_timeout_s=5)
            refused = await send(untrusted, "POST", secure.url, {}, b"three", total_timeout_s=5)
        assert (first.status, second.status) == (200, 200)
        assert [r.body for r in secure.requests] == [b"one", b"two"]
        assert refused.status is None
        assert refused.error is not None
        assert "CERTIFICATE_VERIFY_FAILED" in refused.error


async def test_egress_policy_ranges() -> None:
    refused = {
        "127.0.0.1": "loopback",
        "10.1.2.3": "private",
        "192.168.0.10": "private",
        "172.16.5.5": "private",
        "100.64.0.1": "CGNAT",
        "169.254.169.254": "cloud metadata",
        "169.254.10.1": "link-local",
        "fd00:ec2::254": "cloud metadata",
        "::1": "loopback",
        "fe80::1": "link-local",
        "fc00::1": "private",
        "0.0.0.0": "unspecified",
        "224.0.0.1": "multicast",
        "::ffff:10.0.0.1": "private",
        "64:ff9b::7f00:1": "loopback",
    }
    for address, kind in refused.items():
        reason = egress.refusal(address)
        assert reason is not None, address
        assert kind in reason, (address, reason)
    for address in ("93.184.215.14", "2606:4700::1111", "1.1.1.1"):
        assert egress.refusal(address) is None, address


async def test_a_connection_the_destination_closed_while_idle_is_not_reused(destination: Destination) -> None:
    destination.idle_timeout_s = 0.05
    async with egress.client("any", timeout_s=2, connect_timeout_s=2, max_connections=1) as client:
        first = await send(client, "POST", destination.url, {}, b"one", total_timeout_s=5)

        async def closed() -> bool:  # closed by the destination and seen by this loop (the FIN read): until
            # the loop has read it, any client would reuse the connection (a race no client can close)
            return destination.idle_closed == 1 and client._pool.open == 0

        await wait_for(closed)
        second = await send(client, "POST", destination.url, {}, b"two", total_timeout_s=5)
    assert (first.status, second.status) == (200, 200)
