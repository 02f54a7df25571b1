"""The repository owns its design: nothing points outside it. No file names a design document the repository
does not hold (the design is docs/architecture.md and docs/reference/), every relative link of every Markdown
file reaches a file of the repository (and a heading of it, where the link names one), and every ``docs/...``
path a file mentions (a docstring's or a comment's pointer) exists."""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".hookyard", "test-artifacts", "build", "dist"}
_TEXT = {".py", ".md", ".toml", ".yml", ".yaml", ".sql", ".js", ".mjs", ".css", ".html", ".c", ".txt", ".cfg", ".ini"}
_OUTSIDE = re.compile(r"\b(?:DESIGN|SPEC)\.md\b", re.IGNORECASE)
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\s*\[[^\]\n]+\]:\s*(\S+)", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*[\w/]")


@cache
def _files() -> tuple[Path, ...]:
    """The repository's files: what git tracks and what it would track (not ignored), else every file outside
    the folders that are never part of it."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        paths = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for folder, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(".egg-info")]
            paths += [Path(folder) / n for n in names]
    return tuple(p for p in paths if p.suffix in _TEXT and p.is_file())


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _FENCE.sub("", _text(path)), flags=re.MULTILINE)
    return {_slug(h) for h in headings}


def test_no_file_names_a_design_document_the_repository_does_not_hold() -> None:
    found = [
        f"{_rel(path)}:{number}: {line.strip()}"
        for path in _files()
        for number, line in enumerate(_text(path).splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert not found, "point to docs/architecture.md, docs/reference/ or the OpenAPI document instead:\n" + "\n".join(
        found
    )


def test_every_relative_link_of_every_markdown_file_resolves_inside_the_repository() -> None:
    broken = []
    markdown = [p for p in _files() if p.suffix == ".md"]
    assert ROOT / "README.md" in markdown
    for path in markdown:
        text = _CODE_SPAN.sub("", _FENCE.sub("", _text(path)))
        for match in _LINK.finditer(text):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{_rel(path)}: {target} (no such file in the repository)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{_rel(path)}: {target} (no heading #{anchor} in {_rel(resolved)})")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("kind", ["code", "markdown"])
def test_every_docs_path_a_file_mentions_exists(kind: str) -> None:
    """A docstring's ``docs/adr/0042-delivery-cpu-per-send.md``, a comment's ``docs/SCALING.md``: every path
    under docs/ that a file names, read from the repository's root."""
    missing = []
    for path in _files():
        if (path.suffix == ".md") != (kind == "markdown"):
            continue
        for number, line in enumerate(_text(path).splitlines(), 1):
            for mention in _DOCS_PATH.findall(line):
                if "NNNN" not in mention and not (ROOT / mention.rstrip("/")).exists():  # NNNN: a pattern
                    missing.append(f"{_rel(path)}:{number}: {mention}")
    assert not missing, "\n".join(missing)
