"""The port allocator of tests and benches (bench/ports.py): never the ephemeral range, never the same port twice."""

from __future__ import annotations

import socket
from pathlib import Path

from bench.ports import HIGH, LOW, free_port


def test_ports_are_below_the_ephemeral_range_and_never_repeat() -> None:
    low, _ = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert low > HIGH
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(LOW <= p < HIGH for p in ports)


def test_a_port_someone_listens_on_is_skipped() -> None:
    first = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", first + 1))
        busy.listen()
        assert free_port() != first + 1
