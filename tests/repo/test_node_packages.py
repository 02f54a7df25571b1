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


@pytest.fixture
def kept(node_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What an earlier clone's ``npm ci`` of the same lock file left in the cache (a cache of this test's own)."""
    monkeypatch.setenv("HOOKYARD_NODE_CACHE", str(tmp_path / "cache"))
    kept = node_packages.cached()
    assert kept is not None
    (kept / ".bin").mkdir(parents=True)
    (kept / ".bin" / "tsc").write_text("tsc")
    (kept / ".hy-lock").write_bytes((node_dir / "package-lock.json").read_bytes())
    return kept


def test_a_clone_gets_the_kept_install_of_its_lock_file_without_npm(node_dir: Path, kept: Path) -> None:
    """A clone's first run links what another clone installed from the same lock file (``npm ci`` of this
    fake lock file would fail the test)."""
    installed = node_packages.ensure_node_modules()
    assert node_packages.installed()
    assert (installed / ".bin" / "tsc").stat().st_ino == (kept / ".bin" / "tsc").stat().st_ino  # linked, not copied


def test_an_install_is_kept_only_for_its_own_lock_file(node_dir: Path, kept: Path) -> None:
    (node_dir / "package-lock.json").write_text('{"lockfileVersion": 3, "packages": {}}')
    assert node_packages.cached() != kept  # another lock file: another name, so npm ci would run
    (node_dir / "package-lock.json").write_bytes((kept / ".hy-lock").read_bytes())
    assert node_packages.cached() == kept
    (kept / ".hy-lock").unlink()  # an install that did not finish being kept is not used
    assert not node_packages._linked(kept, node_dir / "node_modules")
