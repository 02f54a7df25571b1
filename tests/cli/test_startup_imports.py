"""A client command starts without the servers' libraries: ``hookyard trigger``, ``open``, ``replay`` and
``--help`` took about 1.3 s, most of it importing asyncpg, redis and the samples, which only the server and
admin commands use, and httpx's own command line client (rich, click, pygments). What a command imports is
counted, not timed: the list holds on any machine, loaded or not."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    *("asyncpg", "redis", "litestar", "granian", "shared.samples", "control.service", "control.db"),  # servers'
    *("rich", "click", "pygments"),  # httpx's own command line client (control._without_httpx_cli)
)
PROBE = """
import json, sys
from control.cli import entry
try:
    entry.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def _imported(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["trigger", "--help"],
        ["trigger", "stripe", "invoice.paid", "--control-url", "http://127.0.0.1:9"],
        ["open", "--no-browser", "--control-url", "http://127.0.0.1:9"],
        ["replay", "--to", "http://127.0.0.1:9/x", "--control-url", "http://127.0.0.1:9"],
    ],
)
def test_a_client_command_imports_no_server_library(args: list[str], tmp_path: Path) -> None:
    key = tmp_path / "api_key"
    key.write_text("hy_live_" + "a" * 32 + "\n")
    imported = _imported(*args, *(["--data-dir", str(tmp_path)] if "--help" not in args else []))
    assert [m for m in imported if m.startswith(HEAVY)] == []


def test_the_command_line_parser_starts_without_asyncio() -> None:
    """``hookyard edge|control`` only read their settings and exec granian: the CLI process that does so
    imports no event loop (issue 44: every test's servers start through it)."""
    assert "asyncio" not in _imported("--help")


EXEC_PROBE = """
import json, os, sys
from control.cli import entry

def execve(*args):  # what the process holds when it would become granian
    print(json.dumps(sorted(sys.modules)))
    sys.exit(0)

os.execve = execve
entry.main([*sys.argv[1:], "--parent-pid", str(os.getppid())])
"""


@pytest.mark.parametrize("server", ["edge", "control"])
def test_a_child_of_up_execs_granian_without_the_servers_libraries(server: str) -> None:
    """``hookyard up`` starts ``edge`` and ``control`` with ``--parent-pid``: tying themselves to it imported
    all of ``control.cli.up`` (asyncpg, redis, the workers), 0.45 s of CPU each, only to exec granian."""
    env = {**os.environ, "DATABASE_URL": "postgresql://x@127.0.0.1:9/x", "REDIS_URL": "redis://127.0.0.1:9"}
    env["HOOKYARD_ENCRYPTION_KEYS"] = "k1:" + base64.b64encode(bytes(32)).decode()  # `up` always hands one down
    done = subprocess.run(
        [sys.executable, "-c", EXEC_PROBE, server, "--port", "9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert [m for m in json.loads(done.stdout.strip().splitlines()[-1]) if m.startswith(HEAVY)] == []


# What only a rare path needs (issue 44: start-up CPU): an OAuth2 destination (oauthlib), a destination's TLS
# certificates (x509), pydantic models (none: Litestar's plugins for them are left out, control.app._App),
# httpx's command line client, OpenTelemetry's SDK (only under OTLP; redis-py probed it: shared.redis_probe).
# The control plane's granian workers import control.app without the CLI.
RARE = ("oauthlib", "cryptography.x509", "pydantic", "attrs", "rich", "click", "pygments", "opentelemetry.sdk.")


@pytest.mark.parametrize(
    "build",
    [
        "from control.app import create_app\n"
        "create_app(load_settings({}, database_url='postgresql://x@127.0.0.1:9/x', redis_url='redis://127.0.0.1:9'))",
        "import control.workers.main",
        "import edge.app",
    ],
)
def test_a_server_process_starts_without_what_only_a_rare_path_needs(build: str) -> None:
    probe = f"import json, sys\nfrom shared.settings import load_settings\n{build}\n"
    probe += "print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert [m for m in json.loads(done.stdout.strip().splitlines()[-1]) if m.startswith(RARE)] == []


def test_the_control_app_imports_the_mcp_sdk_only_when_mcp_is_called() -> None:
    """About 0.7 s of CPU at every control start (issue 24); /mcp starts the SDK on its first call."""
    probe = (
        "import json, sys\n"
        "from control.app import create_app\n"
        "from shared.settings import load_settings\n"
        "create_app(load_settings({}, database_url='postgresql://x@127.0.0.1:9/x', redis_url='redis://127.0.0.1:9'))\n"
        "from control.mcp.registry import TOOLS\n"
        "print(len(TOOLS))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    *_, registered, modules = done.stdout.strip().splitlines()
    assert int(registered) >= 60  # every tool registered all the same: a catalog built now lists them all
    assert [m for m in json.loads(modules) if m.split(".")[0] in ("mcp", "mcp_types")] == []


def test_up_reads_the_loop_names_without_importing_the_loops() -> None:
    """``hookyard up`` splits its worker and learner by the loops' names; importing ``control.workers`` for
    them built every loop's module tree (the delivery package, the learner, the sandbox pool: ~200 modules,
    0.2-0.3 s of CPU) in every ``up``, for a tuple of strings (issue 44: the suite starts ``up`` dozens of
    times). The names still match the loops the worker builds: ``control.workers.main`` checks on import."""
    probe = "import json, sys\nimport control.cli.up\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "control.workers" in modules
    assert [m for m in modules if m.startswith(("control.workers.", "control.delivery", "control.transform"))] == []
