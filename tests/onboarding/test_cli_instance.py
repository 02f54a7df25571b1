"""The client commands find the ``hookyard up`` they belong to, on whatever ports it runs.

One real ``hookyard up`` for the module on free, non-default ports, its data dir ``.hookyard`` in a project
directory of its own (``--data-dir`` names it too), Postgres the machine's (a database of the module) and
Redis embedded: ``dead-letters`` beside a running ``up`` is what failed, because the embedded Redis rewrites
its process title and the port was read from it. Every client command then runs in the project directory
with no flag and no hookyard variable, as in a second terminal; elsewhere ``--data-dir`` or
``HOOKYARD_DATA_DIR`` leads to the same instance; a URL that answers nothing is named with where it came from.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.destination import Destination, serving
from tests.helpers import module_database_url
from tests.onboarding.clirun import Proc, Up, clean_env, cli, ok, up_in
from tests.stack import free_port

pytestmark = pytest.mark.slow

database_url = module_database_url  # one database for the module's `up`


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("project")


@pytest.fixture(scope="module")
def up(project: Path, database_url: str) -> Iterator[Up]:
    """``hookyard up`` with its embedded Redis; the environment of a fresh shell plus DATABASE_URL."""
    with up_in(project, clean_env(DATABASE_URL=database_url)) as running:
        yield running


@pytest.fixture(scope="module")
def destination() -> Iterator[Destination]:
    with serving() as server:
        yield server


def test_up_records_where_it_serves_in_its_data_dir(up: Up, database_url: str) -> None:
    record = up.data_dir / "instance.json"
    assert record.stat().st_mode & 0o777 == 0o600  # the embedded Redis URL carries its password
    written = json.loads(record.read_text())
    assert written["pid"] == up.proc.pid
    assert (written["control_url"], written["edge_url"]) == (up.control_url, up.edge_url)
    assert written["database_url"] == database_url
    assert written["redis_url"].startswith("redis://:")
    assert written["embedded"] == ["redis"]
    second = cli(clean_env(DATABASE_URL=database_url), "up", "--data-dir", str(up.data_dir), cwd=up.data_dir.parent)
    assert second.returncode == 2, second.stderr
    assert f"already serves {up.control_url}" in second.stderr
    assert up.proc.poll() is None


def test_every_client_command_reaches_it_with_no_flag(
    up: Up, project: Path, destination: Destination, procs: list[Proc]
) -> None:
    env = clean_env()
    listen = Proc(["listen", "--start", "--forward-to", destination.url], env, project / "listen.log", cwd=project)
    procs.append(listen)
    ready = listen.wait_for_output(r"Ready\. Send webhooks to (\S+)\n  endpoint (ep_\w+)")
    ingest, ep = ready.group(1), ready.group(2)
    assert ingest.startswith(up.edge_url + "/")
    listen.wait_for_output(rf"restart with: hookyard listen {ep} --forward-to \S+\n")
    assert "--control-url" not in listen.output  # found through the data dir: no flag to repeat
    listen.wait_for_output("Forwarding to")
    tail = Proc(["tail", ep], env, project / "tail.log", cwd=project)
    procs.append(tail)
    tail.wait_for_output("Following 1 endpoint")

    sent = ok(cli(env, "trigger", "stripe", "payment_intent.succeeded", "--endpoint", ep, cwd=project))
    event_id = re.search(r"(evt_\w+)", sent).group(1)  # type: ignore[union-attr]
    listen.wait_for_output(rf"payment_intent\.succeeded .*→ 200 .*{event_id}")
    tail.wait_for_output(rf"event .*{ep}.*payment_intent\.succeeded.*{event_id}")
    assert len(destination.requests) == 1

    link = ok(cli(env, "open", ep, "--no-browser", cwd=project)).strip()
    assert link.startswith(f"{up.control_url}/inbox/{ep}?link="), link
    assert httpx.get(link, follow_redirects=False, trust_env=False).status_code == 303

    assert ok(cli(env, "dead-letters", "list", cwd=project)).strip() == "no dead letters"
    assert ok(cli(env, "dead-letters", "retry", "--all", cwd=project)).startswith("re-driven through the flush: 0")
    made = json.loads(ok(cli(env, "account", "create", "--email", "second@example.com", cwd=project)))
    assert made["api_key"].startswith("hy_live_")  # the Postgres `up` runs on, though it is not embedded

    assert listen.interrupt() == 0
    assert listen.output.rstrip().endswith("stopped")
    assert tail.interrupt() == 0
    assert tail.output.rstrip().endswith("stopped")


def test_another_directory_reaches_it_by_data_dir(up: Up, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ep = _endpoint(up)
    by_flag = cli(
        clean_env(), "trigger", "github", "push", "--endpoint", ep, "--data-dir", str(up.data_dir), cwd=elsewhere
    )
    assert ok(by_flag).startswith(f"sent code_host push to {ep}: 200")
    by_env = cli(clean_env(HOOKYARD_DATA_DIR=str(up.data_dir)), "dead-letters", "list", "--json", cwd=elsewhere)
    assert ok(by_env) == "\n"
    link = ok(cli(clean_env(), "open", ep, "--no-browser", "--data-dir", str(up.data_dir), cwd=elsewhere))
    assert link.startswith(up.control_url + "/inbox/")


def test_a_url_that_answers_nothing_is_named_with_its_source(up: Up, project: Path, tmp_path: Path) -> None:
    ep = _endpoint(up)
    wrong = f"http://127.0.0.1:{free_port()}"
    flag, variable = clean_env(), clean_env(HOOKYARD_CONTROL_URL=wrong)
    cases = [
        ("--control-url", flag, ["trigger", "stripe", "invoice.paid", "--endpoint", ep, "--control-url", wrong]),
        ("--control-url", flag, ["listen", "--start", "--forward-to", "http://127.0.0.1:1", "--control-url", wrong]),
        ("--control-url", flag, ["open", ep, "--no-browser", "--control-url", wrong]),
        ("HOOKYARD_CONTROL_URL", variable, ["open", ep, "--no-browser"]),
        ("HOOKYARD_CONTROL_URL", variable, ["tail"]),
    ]
    for source, env, args in cases:  # both win over the running `up` of the data dir
        done = cli(env, *args, cwd=project)
        assert done.returncode == 1, (args, done.stderr)
        said = done.stderr.strip()
        assert said.startswith(f"hookyard: cannot reach the control plane at {wrong} (from {source}): "), said
        assert len(said.splitlines()) == 1
        assert "Traceback" not in said

    # No `up` on this data dir: the default, and the data dir that was looked at, are named.
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    port = free_port()
    env = clean_env(HOOKYARD_API_KEY=up.key, HOOKYARD_CONTROL_PORT=str(port))
    done = cli(env, "trigger", "stripe", "invoice.paid", "--endpoint", ep, cwd=nowhere)
    assert done.returncode == 1
    assert (
        f"cannot reach the control plane at http://127.0.0.1:{port} (from HOOKYARD_HOST and HOOKYARD_CONTROL_PORT; "
        f"no hookyard up is running on data dir {nowhere.resolve() / '.hookyard'}"
    ) in done.stderr


def test_a_record_whose_process_is_gone_is_stale(up: Up, tmp_path: Path) -> None:
    data_dir = tmp_path / "stale"
    data_dir.mkdir()
    (data_dir / "api_key").write_text(up.key + "\n")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = json.loads((up.data_dir / "instance.json").read_text())
    (data_dir / "instance.json").write_text(json.dumps({**record, "pid": int(gone.stdout)}))
    port = free_port()
    env = clean_env(HOOKYARD_CONTROL_PORT=str(port))
    done = cli(env, "trigger", "stripe", "invoice.paid", "--endpoint", "x", "--data-dir", str(data_dir))
    assert done.returncode == 1
    assert f"at http://127.0.0.1:{port} (from HOOKYARD_HOST and HOOKYARD_CONTROL_PORT; no hookyard up" in done.stderr
    # the same record with the live pid of `up`, but not its start time: a reused pid, not that `up`
    (data_dir / "instance.json").write_text(json.dumps({**record, "started": record["started"] - 3600}))
    done = cli(env, "trigger", "stripe", "invoice.paid", "--endpoint", "x", "--data-dir", str(data_dir))
    assert f"at http://127.0.0.1:{port} (from" in done.stderr
    # and as `up` wrote it: that instance
    (data_dir / "instance.json").write_text(json.dumps(record))
    ep = _endpoint(up)
    done = cli(env, "trigger", "stripe", "invoice.paid", "--endpoint", ep, "--data-dir", str(data_dir))
    assert ok(done).startswith(f"sent payments invoice.paid to {ep}: 200")


def test_the_restart_hint_repeats_a_given_url(up: Up, project: Path, procs: list[Proc]) -> None:
    env = clean_env()
    args = ["listen", "--start", "--forward-to", "http://127.0.0.1:1/x", "--events", "invoice.paid"]
    listen = Proc([*args, "--control-url", up.control_url], env, project / "hint.log", cwd=project)
    procs.append(listen)
    hint = listen.wait_for_output(r"restart with: (.*)\n").group(1)
    assert re.fullmatch(
        rf"hookyard listen ep_\w+ --forward-to http://127\.0\.0\.1:1/x --control-url {re.escape(up.control_url)} "
        r"--events invoice\.paid",
        hint,
    ), hint
    assert listen.interrupt() == 0


def _endpoint(up: Up) -> str:
    resp = httpx.post(
        up.control_url + "/v1/endpoints",
        json={"name": "instance"},
        headers={"authorization": f"Bearer {up.key}"},
        timeout=10,
        trust_env=False,
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])
