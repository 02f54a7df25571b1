"""Taking the tracing instrumentation out of the edge's source, for ``bench.untraced``: every line marked
``# traced``, and the block such a line opens (the body of a marked ``if``), in the modules of ``STRIPPED``.
Apart from ``bench.untraced`` because importing that one replaces the modules (tests import this one)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

__all__ = ("LOADED", "MARK", "STRIPPED", "load", "strip")

MARK = "# traced"
STRIPPED = ("shared.wire", "edge.app")
"""In import order: each one's stripped compilation must exist before the next imports it. ``edge.ingest`` has
no instrumentation to take out: with tracing on, ``edge.tracing`` replaces its stream write at startup."""
LOADED = ("shared.wire", "edge.ingest", "edge.app")
"""What each build of ``bench edge`` (``bench.shipped``, ``bench.untraced``, ``bench.four_kinds``) compiles
through :func:`load`, its mark's lines taken out where there are any, so that all three are loaded alike."""


def strip(source: str, mark: str = MARK) -> str:
    """``source`` without the lines marked ``mark`` and the lines indented under them (the body of a marked
    ``if``). ``bench.four_kinds`` strips ``# catalog`` the same way."""
    out: list[str] = []
    under: int | None = None
    for line in source.splitlines(keepends=True):
        indent = len(line) - len(line.lstrip())
        if under is not None:
            if not line.strip() or indent > under:
                continue
            under = None
        if line.rstrip().endswith(mark) or f"{mark} " in line or line.rstrip().endswith(mark + ","):
            under = indent if line.rstrip().split(mark)[0].rstrip().endswith(":") else None
            continue
        out.append(line)
    return "".join(out)


def load(name: str, mark: str = MARK) -> None:
    """Compiles ``name``'s source stripped of ``mark`` and installs it as that module (and its package's
    attribute)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None
    assert spec.origin is not None
    module = types.ModuleType(name)
    module.__file__ = spec.origin
    module.__package__ = name.rpartition(".")[0]
    sys.modules[name] = module
    package, _, child = name.rpartition(".")
    setattr(importlib.import_module(package), child, module)
    exec(compile(strip(Path(spec.origin).read_text(), mark), spec.origin, "exec"), module.__dict__)  # noqa: S102
