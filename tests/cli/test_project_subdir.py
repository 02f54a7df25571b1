"""Client commands typed in a subdirectory of the project find its ``.hookyard`` (the instance record and
the saved key) in the nearest parent that has one, as git finds ``.git``; ``--data-dir`` and
``HOOKYARD_DATA_DIR`` still win, and the messages name the data dir used.

The instance record is this test process's own (alive, so not stale), pointing at a port nothing listens
on: a command that found it says it cannot reach that URL "from the hookyard up running on data dir …"."""

from __future__ import annotations

from pathlib import Path

from control.cli.commands.clients import nearest_data_dir
from control.cli.instance import instance_of_this_process, write_instance
from tests.onboarding.clirun import clean_env, cli
from tests.stack import free_port


def _project(tmp_path: Path) -> tuple[Path, str]:
    data_dir = tmp_path / "project" / ".hookyard"
    data_dir.mkdir(parents=True)
    (data_dir / "api_key").write_text("hy_live_test_not_a_real_key\n")
    url = f"http://127.0.0.1:{free_port()}"
    write_instance(
        data_dir,
        instance_of_this_process(control_url=url, edge_url=url, database_url="postgresql://x", redis_url="redis://x"),
    )
    return data_dir, url


def test_a_subdirectory_finds_the_projects_instance_and_key(tmp_path: Path) -> None:
    data_dir, url = _project(tmp_path)
    deeper = data_dir.parent / "src" / "app"
    deeper.mkdir(parents=True)
    done = cli(clean_env(), "trigger", "stripe", "invoice.paid", cwd=deeper)
    assert done.returncode != 0
    assert f"cannot reach the control plane at {url}" in done.stderr, done.stderr
    assert f"from the hookyard up running on data dir {data_dir.resolve()}" in done.stderr, done.stderr


def test_data_dir_and_its_variable_win_over_the_nearest(tmp_path: Path) -> None:
    data_dir, url = _project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    for extra, env in (
        (("--data-dir", str(other)), clean_env()),
        ((), clean_env(HOOKYARD_DATA_DIR=str(other))),
    ):
        done = cli(env, "trigger", "stripe", "invoice.paid", *extra, cwd=data_dir.parent)
        assert done.returncode != 0
        assert url not in done.stderr
        assert f"no API key: set HOOKYARD_API_KEY, or run `hookyard up` once (it saves one in {other}" in done.stderr


def test_with_no_hookyard_above_the_message_names_the_directory_it_looked_in(tmp_path: Path) -> None:
    done = cli(clean_env(), "trigger", "stripe", "invoice.paid", cwd=tmp_path)
    assert done.returncode != 0
    assert f"it saves one in {tmp_path.resolve() / '.hookyard' / 'api_key'}" in done.stderr, done.stderr


def test_the_search_stops_at_the_root(tmp_path: Path) -> None:
    assert nearest_data_dir(tmp_path, ".no-such-hookyard-dir") == tmp_path.resolve() / ".no-such-hookyard-dir"
    (tmp_path / ".hookyard").mkdir()
    assert nearest_data_dir(tmp_path / "a" / "b") == tmp_path.resolve() / ".hookyard"
