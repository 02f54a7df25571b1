"""``hookyard up`` restarted on other ports is the same instance (its data dir), and the
client commands treat it so.

``listen`` whose URL came from the instance record re-reads the record while it cannot reach it, follows the
instance to its new URL (saying "control plane moved to …" once, and the endpoint's new ingest URL, its edge
having moved too: ``tail`` says it too), and forwards what arrived meanwhile, once. ``trigger``'s default endpoint
(``control.cli.last``) survives the port change; once that endpoint is deleted, the refusal says which one is
gone and where it was recorded.

Before: ``listen`` retried the old URL forever, and ``trigger`` answered "which endpoint? no `hookyard
listen` has run on http://127.0.0.1:<new port>"."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.destination import Destination, serving
from tests.onboarding.clirun import Proc, Up, clean_env, cli, project_dir, until
from tests.stack import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def project() -> Iterator[Path]:
    with project_dir("hookyard-moved-") as path:
        yield path


@pytest.fixture
def app() -> Iterator[Destination]:
    with serving() as server:
        yield server


def _up(project: Path, name: str) -> Up:
    running = Up(
        clean_env(),
        project / f"{name}.log",
        edge_port=free_port(),
        control_port=free_port(),
        cwd=project,
        data_dir=project / ".hookyard",
    )
    try:
        running.wait_up()
    except BaseException:
        running.kill()
        raise
    return running


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _v1(up: Up, method: str, path: str, **kwargs: object) -> httpx.Response:
    resp = httpx.request(
        method,
        up.control_url + path,
        headers={"authorization": f"Bearer {up.key}"},
        timeout=10,
        trust_env=False,
        **kwargs,  # type: ignore[arg-type]
    )
    resp.raise_for_status()
    return resp


def test_listen_and_the_default_endpoint_follow_up_to_its_new_ports(project: Path, app: Destination) -> None:
    env, first = clean_env(), _up(project, "up-first")
    listen = Proc(["listen", "--start", "--forward-to", app.url], env, project / "listen.log", cwd=project)
    second: Up | None = None
    tail: Proc | None = None
    try:
        ep = listen.wait_for_output(r"^  endpoint (ep_\w+) \(temporary").group(1)
        listen.wait_for_output("^Forwarding to")
        tail = Proc(["tail", ep], env, project / "tail.log", cwd=project)
        tail.wait_for_output("^Following 1 endpoint")
        _v1(first, "POST", "/v1/endpoints", json={"name": "another"})  # so the default is not the only one
        assert _ok(cli(env, "trigger", "stripe", "invoice.paid", cwd=project)).startswith(
            f"sent payments invoice.paid to {ep}: 200"
        )
        until(lambda: len(app.requests) == 1, 30, "the first event forwarded")

        first.ctrl_c()
        second = _up(project, "up-second")
        assert second.control_port != first.control_port
        # The default endpoint survives the port change; the event arrives while listen may still be away.
        sent = _ok(cli(env, "trigger", "github", "push", cwd=project))
        found = re.fullmatch(rf"sent code_host push to {ep}: 200, (evt_\w+)\n", sent)
        assert found, sent

        listen.wait_for_output(
            rf"control plane moved to {re.escape(second.control_url)} \(from the hookyard up running on data dir "
        )
        listen.wait_for_output(rf"→ 200 .*{found.group(1)}$")
        assert listen.output.count("control plane moved to") == 1, listen.output
        # The edge moved with it: the ingest URL printed at the start takes nothing now, so the new one is said.
        shown = re.search(r"^Ready\. Send webhooks to (\S+)$", listen.output, re.MULTILINE)
        assert shown, listen.output
        ingest = _v1(second, "GET", f"/v1/endpoints/{ep}").json()["ingest_url"]
        assert ingest.startswith(second.edge_url), ingest
        assert f"Send webhooks to {ingest} now (was {shown.group(1)})" in listen.output, listen.output
        # tail says it as listen does (it said nothing: its user kept sending to the old URL).
        tail.wait_for_output(re.escape(f"Send webhooks to {ingest} now (was {shown.group(1)}; endpoint {ep})"))
        assert tail.interrupt() == 0
        assert len(app.requests) == 2
        assert app.requests[1].headers.get("x-github-event") == "push"
        assert listen.interrupt() == 0

        _v1(second, "DELETE", f"/v1/endpoints/{ep}")
        _v1(second, "POST", "/v1/endpoints", json={"name": "a third"})  # two left: no only one to fall back on
        gone = cli(env, "trigger", "stripe", "invoice.paid", cwd=project)
        assert gone.returncode == 2, gone.stderr
        assert (
            f"which endpoint? the endpoint `hookyard listen` last followed from data dir {project / '.hookyard'} "
            f"({ep}, on {first.control_url}) is gone" in gone.stderr
        ), gone.stderr
        assert len(app.requests) == 2  # nothing forwarded twice
    finally:
        listen.kill()
        if tail is not None:
            tail.kill()
        first.kill()
        if second is not None:
            second.kill()


def test_listen_names_the_up_running_now_after_a_restart_on_the_same_ports(project: Path, app: Destination) -> None:
    """Issue 45: after ``up`` restarted on the same ports, ``listen`` kept naming the stopped ``up``'s pid: its
    source was read once, and only a move to other ports read the record again. Now every outage reads the
    record: the line says what runs there now (the new ``up``, or none yet), the reconnection names the new
    ``up``, and the next outage names it too, never the first."""
    env, first = clean_env(), _up(project, "up-first")
    ports = {"edge_port": first.edge_port, "control_port": first.control_port}
    listen = Proc(["listen", "--start", "--forward-to", app.url], env, project / "listen.log", cwd=project)
    second: Up | None = None
    try:
        listen.wait_for_output("^Forwarding to")
        first_pid = first.proc.pid
        first.ctrl_c()
        listen.wait_for_output(r"cannot reach the control plane at .*; retrying")
        second = Up(env, project / "up-second.log", cwd=project, data_dir=project / ".hookyard", **ports)
        second.wait_up()
        # Soon after it is back (its backoff is 5 s at most), not when a 25 s wait for events ends (issue 44).
        listen.wait_for_output(
            rf"control plane: reconnected to {re.escape(second.control_url)} \(from the hookyard up running on "
            rf"data dir .*, pid {second.proc.pid}\)$",
            timeout=15,
        )
        told = listen.output
        second.ctrl_c()
        until(lambda: listen.output.count("cannot reach the control plane") == 2, 30, "the second outage")
        after = listen.output[len(told) :]
        assert f"pid {first_pid}" not in after, after
        assert f"pid {second.proc.pid}" in after or ", where no hookyard up is running now; waiting" in after, after
        assert listen.interrupt() == 0
    finally:
        listen.kill()
        first.kill()
        if second is not None:
            second.kill()
