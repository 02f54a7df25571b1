"""The one results table, ``bench/RESULTS.md``: what each bench is held to, and the file ``bench all`` writes.

A bench's targets live in its own module (``TARGETS``, a tuple of ``Target``) so that the number a bench is
judged by changes with the code that measures it; this module only reads them. The table is regenerated, never
edited by hand: a row per target (figure, target, measured, date, commit, machine), then each bench's last line
as it printed it. Its history is git's (``git log -p bench/RESULTS.md``), so the file holds no diary.

``BENCH_ONLY=delivery,pipeline python -m bench all`` measures only those benches and keeps the other rows as
they were, each with the date, commit and machine it was measured on.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ("RESULTS", "Measured", "Target", "commit", "last_line", "machine", "write")

RESULTS = Path(__file__).with_name("RESULTS.md")
_SIGNS = {">=": "≥", "<=": "≤", "==": "="}

_HEAD = """# Benchmark results

Written by `python -m bench all`; do not edit: run it again (`BENCH_ONLY=name,... python -m bench all` for some
benches only). One row per target, each target defined beside its bench (`TARGETS` in `bench/<name>.py`); then
every bench's last line exactly as it printed it. Every bench runs on one machine with its load generator and
its servers (the machine column: cores, CPU, load average when it started), so each figure is a floor. What a
figure means: the docstring of its bench. Older figures: `git log -p bench/RESULTS.md`.

| figure | target | measured | date | commit | machine |
|---|---|---|---|---|---|
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One figure of a bench's last line and what it must be: ``op`` is ``>=``, ``<=`` or ``==``, ``bound``
    ``None`` for a figure shown for context (judged by nothing). ``beside`` names figures of the same line
    printed with it, so a row reads on its own (a ratio with the two rates it divides)."""

    figure: str
    key: str
    op: str = ">="
    bound: float | str | None = None
    unit: str = ""
    beside: tuple[str, ...] = ()

    def target(self) -> str:
        if self.bound is None:
            return "(context)"
        shown = f"{self.bound:,}" if isinstance(self.bound, int) else str(self.bound)
        return f"{_SIGNS[self.op]} {shown}{self.unit}"

    def met(self, figures: dict[str, object]) -> bool | None:
        if self.bound is None:
            return None
        value = figures.get(self.key)
        if isinstance(self.bound, str) or self.op == "==":
            return str(value) == str(self.bound)
        try:
            number = float(str(value))
        except ValueError:  # "n/a" and the like: not measured, so not met
            return False
        return number >= self.bound if self.op == ">=" else number <= self.bound

    def measured(self, figures: dict[str, object]) -> str:
        if self.key not in figures:
            return f"`{self.key}` missing from the bench's line"
        verdict = {True: ": met", False: ": MISSED", None: ""}[self.met(figures)]
        beside = ", ".join(f"{k}={figures[k]}" for k in self.beside if k in figures)
        return f"{figures[self.key]}{self.unit}{verdict}" + (f" ({beside})" if beside else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """One bench's run: its figures (or why it has none) and where and when it ran."""

    name: str
    seconds: float
    figures: dict[str, object] = field(default_factory=dict)
    failure: str = ""
    date: str = ""
    commit: str = ""
    machine: str = ""

    def rows(self, targets: tuple[Target, ...]) -> list[str]:
        where = f"{self.date} | {self.commit} | {self.machine}"
        return [
            f"| `{self.name}`: {t.figure} | {t.target()} | "
            f"{f'not measured: {self.failure}' if self.failure else t.measured(self.figures)} | {where} |"
            for t in targets
        ]

    def line(self) -> str:
        """The bench's last line as ``python -m bench NAME`` prints it, with how it was called."""
        if self.failure:
            return f"- `{self.name}` ({self.date}, {self.commit}): not measured: {self.failure}"
        return f"- `python -m bench {self.name} --seconds {self.seconds:g}`: `{last_line(self.name, self.figures)}`"


def last_line(name: str, figures: dict[str, object]) -> str:
    return f"bench={name} " + " ".join(f"{k}={v}" for k, v in figures.items())


def machine() -> str:
    """Cores, CPU model and the load average when a bench starts: a figure means little without them."""
    model = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}, load {load:.1f}"


def commit() -> str:
    """The commit measured, ``+changes`` when the code differs from it (bench/RESULTS.md aside)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/RESULTS.md"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    return head + (" +changes" if dirty else "")


def today() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


_ROW = re.compile(r"^\| `(?P<name>[a-z_]+)`")
_LINE = re.compile(r"^- `(?:python -m bench )?(?P<name>[a-z_]+)[ `]")


def write(measured: list[Measured], order: tuple[str, ...], targets: dict[str, tuple[Target, ...]]) -> Path:
    """Rewrites bench/RESULTS.md: the rows and lines of the benches just measured, the others' as they were
    (in the order of ``order``)."""
    rows: dict[str, list[str]] = {}
    lines: dict[str, list[str]] = {}
    if RESULTS.exists():
        for text in RESULTS.read_text().splitlines():
            if match := _ROW.match(text):
                rows.setdefault(match["name"], []).append(text)
            elif match := _LINE.match(text):
                lines.setdefault(match["name"], []).append(text)
    for run in measured:
        rows[run.name] = run.rows(targets.get(run.name, ()))
        lines[run.name] = [run.line()]
    names = [n for n in order if n in rows] + sorted(set(rows) - set(order))
    body = [row for n in names for row in rows[n]]
    tail = [text for n in names for text in lines.get(n, [])]
    RESULTS.write_text(_HEAD + "\n".join(body) + "\n\n## Last lines\n\n" + "\n".join(tail) + "\n")
    return RESULTS
