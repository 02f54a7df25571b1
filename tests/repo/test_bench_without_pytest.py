"""``python -m bench`` runs where only hookyard's dependencies are installed: pytest is a dev tool of the
tests, and a bench that needs it (``bench/cluster.py`` once imported the tests' cluster fixture) fails on a
machine set up to measure. A subprocess with pytest unimportable lists the benches and imports every one of
them, as ``python -m bench NAME`` would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.__main__ import BENCHES

ROOT = Path(__file__).resolve().parents[2]

WITHOUT_PYTEST = """
import importlib, runpy, sys
sys.modules["pytest"] = sys.modules["_pytest"] = None  # an import of either now raises ImportError
try:
    import pytest
except ImportError:
    pass
else:
    raise SystemExit("pytest is still importable: this check would prove nothing")
for name in sys.argv[1:]:
    importlib.import_module("bench." + name)
sys.argv = ["python -m bench", "--help"]
runpy.run_module("bench", run_name="__main__", alter_sys=True)
"""


def test_python_m_bench_lists_and_imports_every_bench_without_pytest() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYTEST, *BENCHES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"python -m bench needs pytest:\n{done.stderr[-3000:]}"
    assert "usage: python -m bench" in done.stdout
    assert all(name in done.stdout for name in BENCHES), done.stdout
