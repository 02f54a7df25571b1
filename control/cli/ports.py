"""Whether a server's port is free, asked before it starts: ``up`` for both of its ports, ``edge`` and
``control`` for theirs.

granian binds with ``SO_REUSEPORT``, so a second ``hookyard edge`` (or ``control``) started on a port another
one already serves did not fail: it started beside it, silently, and the kernel split the connections between
the two, each perhaps with another configuration (another Redis, another prefix, other limits). Several
servers on one port is no feature of hookyard: one server scales with ``--workers``, several machines behind a
load balancer each have their own address. So the port is probed first, with ``SO_REUSEADDR`` only (a socket
of a stopped server in TIME_WAIT does not count): a port any socket listens on is refused in one line naming
the setting and the flag, exit 2. A server that comes in between the probe and granian's bind is not seen.
"""

from __future__ import annotations

import errno
import socket

from shared.errors import ConfigError

__all__ = ("check_port", "control_metrics_where")


def check_port(host: str, port: int, variable: str, flag: str) -> None:
    """ConfigError (exit 2) when ``host:port`` is taken, or cannot be listened on at all."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"{variable}: port {port} on {host} is in use; choose another ({flag})") from None
        raise ConfigError(f"HOOKYARD_HOST: cannot listen on {host}:{port}: {exc}") from None


def control_metrics_where(host: str, metrics_port: int | None) -> str:
    """Where control's ``/metrics`` is (it left the API port, ADR 0095), in the words ``hookyard control`` logs
    at start and ``up``'s banner shows: an operator whose scrape of the API port now gets 404 finds why."""
    if metrics_port:
        return f"/metrics on {host}:{metrics_port} (not on the API port)"
    return "/metrics off: HOOKYARD_CONTROL_METRICS_PORT is unset (it is not on the API port)"
