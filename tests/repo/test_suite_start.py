"""What each test process, and each process a test starts, spends before its first line of work
(docs/adr/0043-suite-scheduling.md): no pytest plugin that no test uses is loaded, our modules are read from
bytecode written once for the run, and the test modules' rewritten bytecode is kept for the next run; its
collector runs seldom."""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path
from types import CodeType, ModuleType

import pytest
from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc

import bench.ports
import control.app
import control.cli
import control.workers.main
import edge.app
import shared.settings
import tests.stack
from tests.bytecode import PACKAGES, rewrite_tests
from tests.conftest import GC_THRESHOLD

ROOT = Path(__file__).resolve().parents[2]
UNUSED_PLUGINS = ("schemathesis", "locust", "faker", "anyio", "platformdirs", "benchmark")
STARTED = [bench.ports, control.app, control.cli, control.workers.main, edge.app, shared.settings, tests.stack]


@pytest.mark.parametrize("name", UNUSED_PLUGINS)
def test_a_plugin_no_test_uses_is_not_loaded(request: pytest.FixtureRequest, name: str) -> None:
    assert request.config.pluginmanager.is_blocked(name)
    assert request.config.pluginmanager.get_plugin(name) is None


@pytest.mark.parametrize("module", STARTED, ids=lambda m: m.__name__)
def test_our_modules_have_up_to_date_bytecode(module: ModuleType) -> None:
    """What the servers and commands a test starts import: even where ``PYTHONDONTWRITEBYTECODE`` is set, the
    run wrote it before they started, so none of them compiles it again."""
    source = Path(str(module.__file__))
    assert source.relative_to(ROOT).parts[0] in PACKAGES
    compiled = Path(importlib.util.cache_from_source(str(source)))
    assert compiled.exists(), f"no bytecode for {source.relative_to(ROOT)}"
    header, stat = compiled.read_bytes()[8:16], source.stat()  # how Python decides it is up to date
    assert int.from_bytes(header[:4], "little") == int(stat.st_mtime) & 0xFFFFFFFF
    assert int.from_bytes(header[4:], "little") == stat.st_size & 0xFFFFFFFF


def test_this_test_module_keeps_its_rewritten_bytecode() -> None:
    """pytest writes the module it rewrote for its asserts only where bytecode may be written."""
    here = Path(__file__)
    kept = here.parent / "__pycache__" / f"{here.stem}.{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
    assert not sys.dont_write_bytecode
    assert kept.exists()


def test_the_controller_rewrites_the_test_modules_for_the_workers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """In a clone's first run the workers would each rewrite every test module; the controller writes the
    rewritten bytecode once, as pytest itself writes it, and only what is missing or stale."""
    (tmp_path / "sub").mkdir()
    test_file, conftest, helper = tmp_path / "sub" / "test_x.py", tmp_path / "conftest.py", tmp_path / "helper.py"
    for path in (test_file, conftest, helper):
        path.write_text("def test_one() -> None:\n    assert 1 + 1 == 2\n")
    assert rewrite_tests(request.config, tmp_path) == 2
    for path in (test_file, conftest):
        pyc = path.parent / "__pycache__" / f"{path.stem}{PYC_TAIL}"
        code = _read_pyc(path, pyc)  # what pytest reads instead of rewriting
        assert code is not None
        (function,) = (c for c in code.co_consts if isinstance(c, CodeType))
        assert any(name.startswith("@py_assert") for name in function.co_varnames)  # rewritten, not plain
    assert not (tmp_path / "__pycache__" / f"helper{PYC_TAIL}").exists()  # not a module pytest rewrites
    assert rewrite_tests(request.config, tmp_path) == 0  # up to date: nothing written again
    test_file.write_text("def test_one() -> None:\n    assert 2 + 2 == 4\n\n")
    assert rewrite_tests(request.config, tmp_path) == 1


def test_the_test_process_collects_young_objects_seldom() -> None:
    """A young-generation collection every 700 allocations was ~8% of a test process's CPU (tests/conftest.py)."""
    assert gc.get_threshold() == GC_THRESHOLD
    assert GC_THRESHOLD[0] >= 10_000
