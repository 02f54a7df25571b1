"""The test run installs tests/node's npm packages itself when they are stale (``tests.node_packages``), with the
check CI's script used: the lock file against the copy the last ``npm ci`` left in ``node_modules``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import node_packages


@pytest.fixture
def node_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "package-lock.json").write_text('{"lockfileVersion": 3}')
    monkeypatch.setattr(node_packages, "_LOCK", tmp_path / "package-lock.json")
    monkeypatch.setattr(node_packages, "NODE", tmp_path)
    monkeypatch.setattr(node_packages, "_INSTALLED", tmp_path / "node_modules" / ".hy-lock")
    return tmp_path


def test_nothing_installed_is_stale(node_dir: Path) -> None:
    assert not node_packages.installed()


def test_an_install_of_another_lock_file_is_stale(node_dir: Path) -> None:
    (node_dir / "node_modules" / ".bin").mkdir(parents=True)
    (node_dir / "node_modules" / ".bin" / "tsc").touch()
    (node_dir / "node_modules" / ".hy-lock").write_text('{"lockfileVersion": 2}')
    assert not node_packages.installed()
    (node_dir / "node_modules" / ".hy-lock").write_text('{"lockfileVersion": 3}')
    assert node_packages.installed()


def test_the_repository_lock_file_is_what_the_packages_were_installed_from(node_modules: Path) -> None:
    """After the fixture, tests/node holds exactly what its lock file pins (installed now if it was not)."""
    assert node_packages.installed()
    assert (node_modules / ".bin" / "tsc").exists()
