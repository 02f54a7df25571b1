"""Loopback ports for the servers a test or a bench starts, outside the kernel's ephemeral range.

Why not bind port 0 and hand the number on: between closing the probe and the server's own bind, the kernel may give
that very port to an outgoing connection as its local port (every connection the suite opens takes one from the
ephemeral range), and the server then dies with "Address already in use". It happened: the MCP module's control
process, on a port picked that way, lost it to a connection of the other xdist worker, and fifteen tests failed on
"connection refused". The benches (bench/infra.py), whose topology the fault tests run on, took port 0 too until
they shared this module. A port below the ephemeral range is never given to an outgoing connection, so only explicit
binds can take it.

Each xdist worker takes ports from its own slice of ``LOW``-``HIGH`` and hands out none twice until it has gone
round its whole slice (over 4,000 ports with three workers; a run uses a few hundred), so a process a test left
behind (a worker still retrying its destination) cannot reach a later test's server on a reused port. The start
inside the slice depends on the process id: two suites running at once on one machine rarely meet, and when they do
the probe's bind check skips ports in use.
"""

from __future__ import annotations

import errno
import itertools
import os
import socket
from collections.abc import Iterator

__all__ = ("HIGH", "LOW", "free_port")

LOW = 20_000
HIGH = 32_700
"""Below Linux's default ``ip_local_port_range`` (32768-60999): never an outgoing connection's port."""


def _slice() -> tuple[int, int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    size = (HIGH - LOW) // count
    return LOW + (index % count) * size, size


def _candidates() -> Iterator[int]:
    start, size = _slice()
    offset = (os.getpid() * 7919) % size
    for step in itertools.count():
        yield start + (offset + step) % size


_next = _candidates()


def free_port() -> int:
    """A loopback port nobody listens on now, not handed out before by this process (within a round of its
    slice)."""
    for port in _next:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise
            return port
    raise AssertionError("unreachable: the candidates never end")
