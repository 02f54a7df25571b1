"""The npm packages the generated code is checked with (``tests/node``: TypeScript, zod, Express, pinned by
``package-lock.json``), installed by the test run itself.

The README's test command is ``pip install -e ".[dev]" && python -m pytest``, and on a fresh machine it must
run the Node tests too, not skip them until someone runs ``npm ci`` by hand. So the first test that needs
the packages installs them when ``node_modules`` is stale, with the check CI's script used before: the lock
file differs from the copy left in ``node_modules/.hy-lock`` by the last install. pytest-xdist's workers may
ask at once; a file lock lets one install while the others wait. Without Node.js or npm the tests fail
saying so: a skip would hide that the generated code went unchecked.

A clone's first run (CI's every run) paid ``npm ci`` each time: 8.7 s of CPU, the same packages again. What an
install left is kept outside the clone, one copy per lock file and Node.js version (``cached``, beside mypy's
cache: docs/adr/0058-types-checked-by-mypy-strict-in-the-test-run.md), and a clone whose lock file has one
gets it by hard links (0.2 s of CPU; a copy where the cache is on another file system). Only what ``npm ci``
installed from this very lock file is ever kept, under a name made of the lock file's hash.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
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
            kept = cached()
            if not (kept is not None and _linked(kept, NODE / "node_modules") and installed()):
                _npm_ci()
                if kept is not None:
                    _keep(NODE / "node_modules", kept)
    return NODE / "node_modules"


def _npm_ci() -> None:
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"npm ci in tests/node failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    _INSTALLED.unlink(missing_ok=True)  # a new file, never written through a link into the kept tree
    shutil.copyfile(_LOCK, _INSTALLED)


def cached() -> Path | None:
    """Where an install from this lock file with this Node.js is kept for other clones (``HOOKYARD_NODE_CACHE``,
    else ``~/.cache/hookyard-tests``); None without a ``node`` to ask its version."""
    node = shutil.which("node")
    if node is None:
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    digest = hashlib.sha256(_LOCK.read_bytes() + version.encode()).hexdigest()[:24]
    base = os.environ.get("HOOKYARD_NODE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(base) / "hookyard-tests" / f"node_modules-{digest}"


def _linked(source: Path, target: Path) -> bool:
    """``target`` made a tree of hard links to ``source`` (a copy across file systems); whether it was. What
    was there is removed first, as ``npm ci`` removes it."""
    if not (source / ".hy-lock").exists():
        return False
    shutil.rmtree(target, ignore_errors=True)
    for command in (["cp", "-al"], ["cp", "-a"]):  # links where the cache shares the file system
        if subprocess.run([*command, str(source), str(target)], capture_output=True, check=False).returncode == 0:
            return True
        shutil.rmtree(target, ignore_errors=True)
    return False


def _keep(installed_tree: Path, kept: Path) -> None:
    """Keeps what ``npm ci`` installed, whole or not at all: linked into a temporary folder beside ``kept``,
    then renamed to it (another clone that kept it first wins; this copy is dropped)."""
    with contextlib.suppress(OSError):
        kept.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=kept.parent))
        try:
            if _linked(installed_tree, staging / "node_modules"):
                os.rename(staging / "node_modules", kept)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
