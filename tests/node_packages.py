"""The npm packages the generated code is checked with (``tests/node``: TypeScript, zod, Express, pinned by
``package-lock.json``), installed by the test run itself.

The README's test command is ``pip install -e ".[dev]" && python -m pytest``, and on a fresh machine it must
run the Node tests too, not skip them until someone runs ``npm ci`` by hand. So the first test that needs
the packages installs them when ``node_modules`` is stale, with the check CI's script used before: the lock
file differs from the copy left in ``node_modules/.hy-lock`` by the last install. pytest-xdist's workers may
ask at once; a file lock lets one install while the others wait. Without Node.js or npm the tests fail
saying so: a skip would hide that the generated code went unchecked.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ("NODE", "ensure_node_modules", "installed", "node_executable")

NODE = Path(__file__).resolve().parent / "node"
_LOCK = NODE / "package-lock.json"
_INSTALLED = NODE / "node_modules" / ".hy-lock"
_GUARD = NODE / ".npm-ci.lock"


def node_executable() -> str:
    """The ``node`` on PATH; fails the test, naming it, when there is none (a skip would hide the check)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node not found: these tests need Node.js 18+ (apt-get install -y nodejs)")
    return node


def installed() -> bool:
    """``node_modules`` holds what the lock file pins: the last ``npm ci`` left a copy of this very lock file."""
    try:
        return _INSTALLED.read_bytes() == _LOCK.read_bytes() and (NODE / "node_modules" / ".bin" / "tsc").exists()
    except FileNotFoundError:
        return False


def ensure_node_modules() -> Path:
    """``tests/node/node_modules``, installed with ``npm ci`` first when stale; fails the test, naming what is
    missing, when Node.js or npm is not installed or the install fails."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: the generated-code tests need Node.js 18+ with npm")
    with open(_GUARD, "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one install at a time; the others find it done
        if not installed():
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                pytest.fail(f"npm ci in tests/node failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
            shutil.copyfile(_LOCK, _INSTALLED)
    return NODE / "node_modules"
