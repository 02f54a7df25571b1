"""One ``hookyard up`` for a test module, as a person runs it: in a directory of its own (its data dir is
``.hookyard`` there, so ``cat .hookyard/api_key`` is its key), on ports other than the defaults, on the test
servers (a database and Redis prefix of the module's), with an app of the test's to forward and replay to."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import Servers, forget_prefix
from tests.destination import Destination, Reply, serving
from tests.onboarding.clirun import Proc
from tests.stack import free_port

__all__ = ("Instance", "running_up")


@dataclass
class Instance:
    home: Path
    env: dict[str, str]
    edge_port: int
    control_port: int
    app: Destination
    """Answers every request 200 ``ok`` and records it."""
    down_port: int
    """Nothing listens here: a destination that is down."""

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    @property
    def key(self) -> str:
        return (self.home / ".hookyard" / "api_key").read_text().strip()


@contextlib.contextmanager
def running_up(servers: Servers, database_url: str, home: Path) -> Iterator[Instance]:
    """The instance until the block ends; then Ctrl-C, which must stop it cleanly (exit 0)."""
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    edge_port, control_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
    env.update(
        # the documents' `hookyard` is the tree under test's (tests.stack.hookyard_command), not the first on
        # PATH: run by a venv's python without the venv activated, that was another checkout's command
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        DATABASE_URL=database_url,
        REDIS_URL=servers.redis_url,
        HOOKYARD_REDIS_PREFIX=prefix,
        # the client commands find the instance through the same variables
        HOOKYARD_EDGE_PORT=str(edge_port),
        HOOKYARD_CONTROL_PORT=str(control_port),
        BROWSER="true",  # hookyard open opens nothing
    )
    up = Proc(["up", "--data-dir", str(home / ".hookyard")], env, home / "up.log", cwd=home)
    code: int | None = None
    try:
        up.wait_for_output("hookyard is up", timeout=120)
        with serving() as app:
            app.default = Reply(body=b"ok")
            yield Instance(home, env, edge_port, control_port, app, free_port())
    finally:
        code = up.interrupt() if up.proc.poll() is None else up.proc.returncode
        up.kill()
        asyncio.run(forget_prefix(servers.redis_url, prefix))
    assert code == 0, up.output
