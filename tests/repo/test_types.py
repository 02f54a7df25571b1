"""The type checker: ``mypy --strict`` over control/, edge/ and shared/ (``[tool.mypy]`` in pyproject.toml) finds
no error, so a wrong annotation fails the test command like a failing test does.

mypy runs in its own process (as a contributor would run it) with its incremental cache outside the clone
(``_cache_dir``), so a fresh clone or worktree on the same machine starts warm. Measured on the 2-core
machine (load about 4): without a cache each of the two tests took 10 s, with it (nothing changed) 0.4 s;
under a load of 12, 57 s cold for both. The configured run is made once for both tests, and the debt test's
first run starts from a copy of its cache: only the listed modules, whose options differ, are checked again,
3.6 s instead of a second cold run (37-59 s at a load of 10-13). Modules listed under "type debt: issue 44"
in pyproject.toml are still checked, their errors not reported; the test fails if one
of them becomes clean, so the list only shrinks."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cache_dir() -> Path:
    """mypy's incremental cache, one per user, mypy version and Python, shared by every clone: a cold check is
    about 19 s of CPU (mypy 2.4, 338 files; 50 s of wall at a load of 5), the warm one from another clone's
    cache 0.8 s. Safe to share: mypy checks each cached module against its source by hash (a clone's files
    have other mtimes), against the options and its own version, and rechecks what changed and what depends
    on it; its store is SQLite, written in one transaction per run, so two clones checking at once each read
    a consistent cache (docs/adr/0058-types-checked-by-mypy-strict-in-the-test-run.md). ``MYPY_CACHE_DIR``
    (mypy's own variable; a ``HOOKYARD_*`` one would stop every ``hookyard`` the suite starts) names another."""
    given = os.environ.get("MYPY_CACHE_DIR")
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = re.sub(r"\W+", "-", importlib.metadata.version("mypy"))
    return base / "hookyard-tests" / f"mypy-{version}-py{sys.version_info[0]}.{sys.version_info[1]}"


CACHE = _cache_dir()


def _mypy(*extra: str, cache: Path = CACHE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-color-output", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def checked() -> subprocess.CompletedProcess[str]:
    """mypy as configured, run once for both tests (the debt test starts from its cache)."""
    return _mypy()


def test_mypy_strict_finds_no_error(checked: subprocess.CompletedProcess[str]) -> None:
    done = checked
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout


def _debt() -> list[str]:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"].get("overrides", [])
    return sorted(m for o in overrides if o.get("ignore_errors") for m in o["module"])


def test_type_debt_only_lists_modules_that_still_fail(checked: subprocess.CompletedProcess[str]) -> None:
    """Each module excused by ``ignore_errors`` still has an error without the excuse: a module made clean
    must leave the list, so the list is the debt that remains. ``checked``: the configured run, whose cache
    this run starts from."""
    debt = _debt()
    if not debt:
        return
    cache = CACHE.with_name(CACHE.name + "-without-debt")
    if not cache.is_dir():  # the configured run's cache: only the listed modules, whose options differ, rechecked
        shutil.copytree(CACHE, cache)
    done = _mypy("--config-file", str(_without_debt()), cache=cache)
    failing = {_module(path) for path in re.findall(r"^([\w/]+\.py):\d+: error", done.stdout, re.MULTILINE)}
    clean = [m for m in debt if m not in failing]
    assert not clean, f"clean now, remove from the type debt in pyproject.toml: {clean}"


def _module(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _without_debt() -> Path:
    """pyproject.toml's mypy settings without the debt overrides (mypy reads only its [tool.mypy] tables)."""
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("# type debt: issue 44")
    end = text.index("\n[", text.index("ignore_errors = true", start))
    out = ROOT / ".pytest_cache" / "mypy-without-debt.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text[:start] + text[end:])
    return out


_IGNORE = re.compile(r"#\s*type:\s*ignore")
_EXPLAINED = re.compile(r"#\s*type:\s*ignore\[[-\w, ]+\]\s+#\s*\S")


def test_each_type_ignore_names_its_error_and_says_why() -> None:
    """An ignore names the error it silences (``[code]``: mypy then reports it when unused or when another
    error appears on the line) and says why on its line (``# type: ignore[code]  # why``)."""
    bare = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("control", "edge", "shared")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _IGNORE.search(line) and not _EXPLAINED.search(line)
    ]
    assert not bare, "type: ignore without an error code and a reason:\n" + "\n".join(bare)
