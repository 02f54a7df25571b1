"""Bytecode for the tree under test, written once per run before any test process or server starts.

Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine sets it), no interpreter writes bytecode, so each of the
hundreds a run starts (the xdist workers, every ``hookyard`` control, edge and worker a test starts, ``up``'s
children, the CLI commands) compiled our ~400 modules from source again: importing the control app and the CLI
took 1.4 s of CPU that way against 1.0 s from bytecode. Python still reads bytecode it finds when told not to
write any, so the controller compiles the tree once (an up-to-date file is only checked), where Python itself
would put it (``__pycache__``, ignored by git); every process after it reads that.

The test modules are not among them: pytest rewrites their asserts on import and keeps the result beside them
(``*-pytest-*.pyc``) only where bytecode may be written. The test processes write it (``keep_rewritten_tests``),
so a run after the first in a clone skips the rewriting: collecting the whole suite in one process took 18 s
of CPU without those files and 8 s with them.
"""

from __future__ import annotations

import compileall
import re
import sys
from pathlib import Path

PACKAGES = ("bench", "control", "edge", "shared", "tests")
"""Ours: what the test processes and the processes they start import. Not the site-packages, which pip
compiled when it installed them."""

_SKIPPED = re.compile(r"[/\\](node_modules|\.gen-[^/\\]*)[/\\]")
"""tests/node's npm packages (some carry Python files of their own build tools) and the folders the codegen
tests write and remove meanwhile."""


def compile_tree(root: Path) -> bool:
    """Compile every module of ``PACKAGES`` under ``root`` that has no up-to-date bytecode; whether all
    compiled (a file that does not compile is the test run's to report, not this)."""
    ok = True
    for package in PACKAGES:
        ok &= bool(compileall.compile_dir(root / package, quiet=2, rx=_SKIPPED))
    return ok


def keep_rewritten_tests() -> None:
    """Let this test process write the bytecode of what it imports, pytest's rewritten test modules among them
    (an up-to-date file is read, a stale one rewritten: Python and pytest both check the source's mtime and
    size). Only the test process's own setting: the processes it starts inherit the environment as it is."""
    sys.dont_write_bytecode = False
