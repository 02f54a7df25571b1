"""A fresh clone on non-default ports goes from nothing to a captured,
inspected and replayed webhook with ``hookyard up``, ``hookyard listen --start`` and ``hookyard trigger``,
and no id copied by hand.

One ``hookyard up`` for the module as a fresh clone runs it: no database or Redis given (both embedded), free
ports other than the defaults, its data dir ``.hookyard`` in a project directory. Every other command runs in
that directory with no flag naming an instance or an endpoint, in the environment of a fresh shell: the ids
are only read from outputs to check them, never passed on. ``listen --start`` records its endpoint
(``control.cli.last``); ``trigger``, ``open`` and ``replay`` default to it, ``replay`` to where it forwards.
Without that record, an account's only endpoint is the default, and with several the command refuses,
listing them. ``up``'s own output is one ready line and no line per outbound request.

Before: ``trigger`` required ``--endpoint``, ``open`` an EP, there was no ``replay`` command, ``up`` printed
``hookyard is up`` with the URLs on other lines, and the control plane logged an ``httpx`` INFO line per
test webhook.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.destination import Destination, serving
from tests.onboarding.clirun import Proc, Up, clean_env, cli, ok, project_dir, up_in

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project() -> Iterator[Path]:
    with project_dir("hookyard-first-hour-") as path:
        yield path


@pytest.fixture(scope="module")
def up(project: Path) -> Iterator[Up]:
    with up_in(project, clean_env()) as running:
        yield running


@pytest.fixture(scope="module")
def app() -> Iterator[Destination]:
    with serving() as server:
        yield server


def test_from_nothing_to_a_replayed_webhook_with_no_id_copied(up: Up, project: Path, app: Destination) -> None:
    shown = re.findall(r"^hookyard is up.*$", up.output, re.MULTILINE)
    assert shown == [f"hookyard is up: control {up.control_url}, edge {up.edge_url}"], up.output
    env = clean_env()
    listen = Proc(["listen", "--start", "--forward-to", app.url], env, project / "listen.log", cwd=project)
    try:
        ep = listen.wait_for_output(r"^  endpoint (ep_\w+) \(temporary").group(1)
        listen.wait_for_output("^Forwarding to")

        sent = ok(cli(env, "trigger", "stripe", "payment_intent.succeeded", cwd=project))
        found = re.fullmatch(rf"sent payments payment_intent\.succeeded to {ep}: 200, (evt_\w+)\n", sent)
        assert found, sent
        event_id = found.group(1)
        listen.wait_for_output(rf"payment_intent\.succeeded .*→ 200 .*{event_id}$")
        (forwarded,) = app.requests
        assert "stripe-signature" in forwarded.headers

        # inspected: the inbox link of the same endpoint, opened as a browser opens it
        link = ok(cli(env, "open", "--no-browser", cwd=project)).strip()
        assert link.startswith(f"{up.control_url}/inbox/{ep}?link="), link
        with httpx.Client(trust_env=False, timeout=10, follow_redirects=True) as browser:
            assert browser.get(link).status_code == 200
            listed = browser.get(f"{up.control_url}/inbox/{ep}/events").json()
            assert [e["id"] for e in listed["events"]] == [event_id]
            shown_event = browser.get(f"{up.control_url}/inbox/{ep}/events/{event_id}").json()
            assert shown_event["headers"]["stripe-signature"] == forwarded.headers["stripe-signature"]

        # replayed: the latest event, to where listen forwards, exactly as it arrived
        replayed = ok(cli(env, "replay", cwd=project))
        assert re.fullmatch(rf"replayed {event_id} to {re.escape(app.url)}: 200, \d+ ms \(dlv_\w+\)\n", replayed)
        first, again = app.requests
        assert (again.body, again.headers["stripe-signature"]) == (first.body, first.headers["stripe-signature"])

        # another endpoint made meanwhile does not change which one the commands mean
        _endpoint(up, "later")
        assert ok(cli(env, "trigger", "github", "push", cwd=project)).startswith(f"sent code_host push to {ep}: 200")
        assert listen.interrupt() == 0
    finally:
        listen.kill()
    assert "HTTP Request:" not in up.output  # no httpx line per outbound request


def test_without_a_listen_the_only_endpoint_is_the_default_and_several_are_listed(up: Up, tmp_path: Path) -> None:
    made = json.loads(ok(cli(clean_env(), "account", "create", "--email", "solo@example.com", cwd=up.data_dir.parent)))
    env = clean_env(HOOKYARD_API_KEY=made["api_key"], HOOKYARD_CONTROL_URL=up.control_url)
    elsewhere = tmp_path  # no record of any listen here

    none = cli(env, "trigger", "stripe", "invoice.paid", cwd=elsewhere)
    assert none.returncode == 2, none.stderr
    assert none.stderr.startswith("hookyard: --endpoint: this account has no endpoint yet; `hookyard listen --start")

    only = _endpoint(up, "only", made["api_key"])
    assert ok(cli(env, "trigger", "stripe", "invoice.paid", cwd=elsewhere)).startswith(
        f"sent payments invoice.paid to {only}: 200"
    )
    link = ok(cli(env, "open", "--no-browser", cwd=elsewhere))
    assert f"/inbox/{only}?link=" in link
    refused = cli(env, "replay", cwd=elsewhere)
    assert refused.returncode == 2
    assert refused.stderr.startswith("hookyard: --to: where to?"), refused.stderr

    second = _endpoint(up, "second", made["api_key"])
    several = cli(env, "trigger", "stripe", "invoice.paid", cwd=elsewhere)
    assert several.returncode == 2, several.stderr
    said = several.stderr.strip()
    assert said.startswith("hookyard: --endpoint: which endpoint? no `hookyard listen` has run on"), said
    assert f"this account has 2: {second} (second), {only} (only); name one with --endpoint" in said
    assert len(said.splitlines()) == 1


def _endpoint(up: Up, name: str, key: str | None = None) -> str:
    resp = httpx.post(
        up.control_url + "/v1/endpoints",
        json={"name": name},
        headers={"authorization": f"Bearer {key or up.key}"},
        timeout=10,
        trust_env=False,
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])
