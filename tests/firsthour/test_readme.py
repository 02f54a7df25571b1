"""Issue 25, item 7: the README runs as written.

Every shell block of README.md, in order, against one ``hookyard up`` on ports other than the README's, in a
directory of its own (so ``.hookyard/api_key`` is that instance's), with each documented output checked by
its shape and the ids later commands use captured from earlier outputs (``docrun`` and ``docshape`` say how;
the conventions are in ``docshape``'s docstring). The README's ``localhost:3000`` is an app of this test that
answers ``ok``; its ``localhost:4000`` is a port nothing listens on (the destination that is down). The
install commands are not run (the suite runs installed); they are checked against what CI runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from tests.conftest import Servers
from tests.destination import Destination, Reply, serving
from tests.firsthour.clirun import Proc, until
from tests.firsthour.docrun import Session
from tests.firsthour.docshape import commands, fenced_blocks
from tests.helpers import module_database_url
from tests.stack import free_port

pytestmark = pytest.mark.slow

database_url = module_database_url

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUN = "pip install -e . && hookyard up"
TEST = 'pip install -e ".[dev]" && python -m pytest'


@dataclass
class Instance:
    home: Path
    env: dict[str, str]
    edge_port: int
    control_port: int
    app: Destination
    down_port: int

    @property
    def substitutions(self) -> dict[str, str]:
        return {
            "127.0.0.1:8000": f"127.0.0.1:{self.control_port}",
            "127.0.0.1:8080": f"127.0.0.1:{self.edge_port}",
            "localhost:3000": f"localhost:{self.app.port}",
            "localhost:4000": f"localhost:{self.down_port}",
        }


def up_env(servers: Servers, database_url: str, prefix: str, edge_port: int, control_port: int) -> dict[str, str]:
    """A person's environment pointing at this test's servers, with the instance on its own ports (the client
    commands find it through the same variables); ``BROWSER=true`` so ``hookyard open`` opens nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=servers.redis_url,
        HOOKYARD_REDIS_PREFIX=prefix,
        HOOKYARD_EDGE_PORT=str(edge_port),
        HOOKYARD_CONTROL_PORT=str(control_port),
        BROWSER="true",
    )
    return env


@pytest.fixture(scope="module")
def instance(servers: Servers, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    home = tmp_path_factory.mktemp("readme")
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    edge_port, control_port = free_port(), free_port()
    env = up_env(servers, database_url, prefix, edge_port, control_port)
    up = Proc(["up", "--data-dir", str(home / ".hookyard")], env, home / "up.log", cwd=home)
    try:
        up.wait_for_output("hookyard is up", timeout=120)
        with serving() as app:
            app.default = Reply(body=b"ok")
            yield Instance(home, env, edge_port, control_port, app, free_port())
    finally:
        code = up.interrupt(timeout=30) if up.proc.poll() is None else up.proc.returncode
        up.kill()
        asyncio.run(_forget(servers.redis_url, prefix))
    assert code == 0, up.output


async def _forget(redis_url: str, prefix: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def test_the_install_commands_are_the_ones_ci_runs() -> None:
    """The Quickstart's first block: running installs only what running needs, testing adds the dev extras,
    and CI runs exactly the README's test command."""
    start, lines = fenced_blocks(README.read_text())[0]
    written = [command.text.split("#")[0].strip() for command in commands(lines, start)]
    assert written == [RUN, TEST]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == TEST


def _answers(session: Session, fragment: str) -> list[Any]:
    return [json.loads(out) for command, out in session.ran if fragment in command.text and out.startswith("{")]


def test_the_readme_runs_as_written(instance: Instance) -> None:
    session = Session(instance.home, instance.env, instance.substitutions)
    blocks = fenced_blocks(README.read_text())
    try:
        for start, lines in blocks[1:]:  # the first is the install (above)
            for command in commands(lines, start):
                session.run(command)
            session.end_block()
    finally:
        session.close()

    ran = "\n".join(command.text for command, _ in session.ran)
    for taught in ("hookyard listen", "hookyard trigger", "hookyard open", "/api/start", "/test-webhook",
                   "/events/wait?after=", "/replay", "/deliveries/retry", "/labels", "/schemas", "/allowlist",
                   "/stats"):  # fmt: skip
        assert taught in ran, f"no README command with {taught!r} ran"
    # What the README's outputs show by shape, in numbers: the two refusals it shows, counted by reason
    # (each edge writes its counts about once a second, so they may trail the README's stats call).
    (stats,) = _answers(session, "/stats")
    endpoint_id = stats["endpoint_id"]
    key = (instance.home / ".hookyard" / "api_key").read_text().strip()

    def refused() -> dict[str, Any] | None:
        url = f"http://127.0.0.1:{instance.control_port}/v1/endpoints/{endpoint_id}/stats"
        answer = httpx.get(url, headers={"authorization": f"Bearer {key}"}, timeout=10).json()["refused"]
        return answer if answer["total"] >= 2 else None

    counted = until(refused, timeout=15, what="the README's two refusals in the stats")
    assert counted["total"] == 2, counted
    assert counted["ip_not_allowed"] == 1
    assert counted["signature_invalid"]["missing_header"] == 1
    # listen forwarded the trigger's sample, and the replay reached the same app re-signed
    received = instance.app.requests
    assert any("stripe-signature" in r.headers for r in received), [r.headers for r in received]
    assert any("x-signature" in r.headers for r in received), [r.headers for r in received]
