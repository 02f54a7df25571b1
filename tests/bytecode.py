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
of CPU without those files and 8 s with them. In a clone's first run (CI's every run) the xdist workers
collect at once and each rewrote every test module itself; the controller now rewrites them once before any
worker starts (``rewrite_tests``), and the workers read what it wrote.
"""

from __future__ import annotations

import compileall
import fnmatch
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
from _pytest.assertion import assertstate_key
from _pytest.assertion.rewrite import PYC_TAIL, _rewrite_test, _write_pyc, get_cache_dir, try_makedirs

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


def rewrite_tests(config: pytest.Config, root: Path) -> int:
    """Write pytest's rewritten bytecode of every module under ``root`` that it rewrites on import (the test
    files and conftests) where it is missing or stale, as pytest itself would on import; how many were
    written. Done by the controller once: the three workers each rewrote all of them at once, 5.5 s of CPU
    apiece in a fresh clone (collection 8.9 → 3.4 s of CPU with the files there). Nothing is written under
    ``--assert=plain``, nor in a read-only tree."""
    state = config.stash.get(assertstate_key, None)
    if state is None or state.mode != "rewrite":
        return 0
    patterns = [*config.getini("python_files"), "conftest.py"]
    written = 0
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in ("node_modules", "__pycache__") and not d.startswith(".")]
        for name in names:
            if not name.endswith(".py") or not any(fnmatch.fnmatch(name, p) for p in patterns):
                continue
            source = Path(directory, name)
            cache_dir = get_cache_dir(source)
            pyc = cache_dir / (name[:-3] + PYC_TAIL)
            if _up_to_date(source, pyc):
                continue
            if not try_makedirs(cache_dir):  # a read-only tree: pytest rewrites in memory, so do we not at all
                return written
            source_stat, code = _rewrite_test(source, config)
            written += _write_pyc(state, code, source_stat, pyc)
    return written


def _up_to_date(source: Path, pyc: Path) -> bool:
    """pytest's own test of a rewritten module's bytecode (``_read_pyc``), without unmarshalling it."""
    try:
        with open(pyc, "rb") as f:
            header = f.read(16)
    except OSError:
        return False
    stat = source.stat()
    return (
        len(header) == 16
        and header[:4] == importlib.util.MAGIC_NUMBER
        and header[4:8] == bytes(4)
        and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )
