"""shared.networks: an address in a set of networks, IPv4-mapped IPv6 addresses and ranges read as the IPv4
they are, the one check behind the edge's allowlist and the trusted proxies of both planes (hypothesis)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.trust import ServedEndpoint
from shared.clientip import ClientIP
from shared.keys import Keys
from shared.networks import address, covers, network
from shared.wire import EdgeEndpoint

V4 = st.ip_addresses(v=4)
V4_NETWORKS = st.builds(
    lambda addr, prefix: ipaddress.IPv4Network((addr, prefix), strict=False), V4, st.integers(0, 32)
)


@given(addr=V4, net=V4_NETWORKS)
def test_an_ipv4_address_is_covered_in_either_form(addr: ipaddress.IPv4Address, net: ipaddress.IPv4Network) -> None:
    inside = addr in net
    assert covers([net], str(addr)) is inside
    assert covers([net], f"::ffff:{addr}") is inside  # how a dual-stack socket reports an IPv4 peer
    assert address(f"::ffff:{addr}") == addr


@given(addr=V4, net=V4_NETWORKS)
def test_an_ipv4_mapped_range_is_the_ipv4_range(addr: ipaddress.IPv4Address, net: ipaddress.IPv4Network) -> None:
    mapped = network(f"::ffff:{net.network_address}/{net.prefixlen + 96}")
    assert mapped == net
    assert covers([mapped], str(addr)) is (addr in net)
    assert covers([mapped], f"::ffff:{addr}") is (addr in net)


@given(addr=st.ip_addresses(v=6), prefix=st.integers(0, 128))
def test_ipv6_is_checked_as_it_is(addr: ipaddress.IPv6Address, prefix: int) -> None:
    net = network(f"{addr}/{prefix}")
    if addr.ipv4_mapped is None:
        assert net == ipaddress.IPv6Network((addr, prefix), strict=False)
        assert covers([net], str(addr))


@pytest.mark.parametrize("text", ["", "not-an-ip", "10.0.0.256", "10.0.0.1/8", "unix:/tmp/s", "::ffff:10.0.0.1.5"])
def test_text_that_is_no_address_is_covered_by_nothing(text: str) -> None:
    assert address(text) is None
    assert covers([network("0.0.0.0/0"), network("::/0")], text) is False


@given(addr=V4, net=V4_NETWORKS, mapped_peer=st.booleans())
def test_the_allowlist_and_the_trusted_proxies_read_an_address_alike(
    addr: ipaddress.IPv4Address, net: ipaddress.IPv4Network, mapped_peer: bool
) -> None:
    peer = f"::ffff:{addr}" if mapped_peer else str(addr)
    served = ServedEndpoint(
        EdgeEndpoint(endpoint_id="ep_1", account_id="acc_1", environment="live", allowlist=(str(net),)), Keys("t")
    )
    proxies = ClientIP([str(net)])
    forwarded = [(b"x-forwarded-for", b"198.51.100.9")]
    assert served.ip_allowed(peer) is (addr in net)
    trusted = proxies.resolve(peer, forwarded) == "198.51.100.9"
    assert trusted is (addr in net and ipaddress.ip_address("198.51.100.9") not in net)
