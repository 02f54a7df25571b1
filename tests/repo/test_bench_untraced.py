"""``bench.untraced`` takes out exactly the tracing instrumentation of the edge's path (every line marked
``# traced`` and the block it opens), and what is left compiles: the bench's "instrumentation removed" app is
the shipped edge less those lines, nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.strip import MARK, STRIPPED, strip

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", STRIPPED)
def test_stripping_removes_the_marked_lines_only_and_compiles(module: str) -> None:
    source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
    stripped = strip(source)
    ast.parse(stripped)
    assert MARK in source
    assert MARK not in stripped
    code = [line for line in stripped.splitlines() if not line.lstrip().startswith(("#", '"""', "``"))]
    assert not [line for line in code if "TracedIngest" in line or "self.tracing" in line or ".traceparent" in line]
    kept = set(stripped.splitlines())
    removed = [line for line in source.splitlines() if line not in kept and line.strip()]
    assert all(MARK in line or line.startswith(" ") for line in removed)  # marked lines and their blocks
    assert len(removed) <= 2 * source.count(MARK)
