"""``hookyard tail`` at the seams a fresh-clone trial found: its key revoked while it follows (it died with an
``ExceptionGroup`` traceback where ``listen`` ended with one line), and the control plane stopped and started
again while it follows two endpoints (it said "cannot reach ... retrying" once per task, three times within a
second). Real edge, control and worker processes (``tests.stack``), the CLI as a subprocess."""

from __future__ import annotations

import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from control.service.accounts import hash_key
from shared.settings import Settings
from tests.onboarding.clirun import Proc

pytestmark = pytest.mark.slow

REFUSED = "hookyard: API key is invalid, revoked or expired (401 unauthorized)"


async def _revoke(database_url: str, key: str) -> None:
    """As a key stops working for the trial's user (``up`` restarted on another database): /v1 has no revoke."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "UPDATE api_keys SET revoked_at = now() WHERE account_id = (SELECT account_id FROM api_keys k "
            "WHERE k.key_hash = $1)",
            hash_key(key),
        )
    finally:
        await conn.close()


async def test_tail_ends_as_listen_does_when_its_key_is_revoked(
    stack_cli_and_api, module_settings: Settings, procs: list[Proc], tmp_path: Path
) -> None:
    _stack, env, api = stack_cli_and_api
    first = api.post("/v1/endpoints", json={"name": "one"}).json()
    api.post("/v1/endpoints", json={"name": "two"})
    tail = Proc(["tail"], env, tmp_path / "tail.log")
    listen = Proc(["listen", first["id"], "--forward-to", "http://127.0.0.1:9/"], env, tmp_path / "listen.log")
    procs += [tail, listen]
    tail.wait_for_output("Following 2 endpoint")
    listen.wait_for_output("Forwarding to ")
    await _revoke(module_settings.database_url, env["HOOKYARD_API_KEY"])
    # An event ends the long polls in flight (granted before the revocation) at once, not 25 s later: each
    # command's next call carries the revoked key, the call that must end it. tail would also end on its list
    # of new endpoints (every 2 s); listen has only its follow, which an idle endpoint answers after 25 s.
    httpx.post(first["ingest_url"], json={"after": "revoked"}, timeout=10, trust_env=False).raise_for_status()
    assert tail.proc.wait(30) == listen.proc.wait(30) == 1
    for proc in (tail, listen):
        assert proc.output.rstrip().endswith(REFUSED), proc.output
        assert "Traceback" not in proc.output, proc.output
        assert "ExceptionGroup" not in proc.output, proc.output


def test_tail_says_an_outage_once_for_all_it_follows(stack_cli_and_api, procs: list[Proc], tmp_path: Path) -> None:
    stack, env, api = stack_cli_and_api
    for name in ("one", "two"):
        api.post("/v1/endpoints", json={"name": name})
    tail = Proc(["tail"], env, tmp_path / "tail.log")
    procs.append(tail)
    tail.wait_for_output("Following 2 endpoint")
    stack.kill("control")  # SIGKILL, with tail's long polls and its deliveries polls in flight
    tail.wait_for_output("cannot reach the control plane at .*retrying")
    time.sleep(2.5)  # each of its tasks has met the outage and retried by now
    stack.start_control()
    tail.wait_for_output("reconnected")
    time.sleep(2.5)  # each task has been answered again by now
    assert tail.output.count("cannot reach the control plane") == 1, tail.output
    assert tail.output.count("reconnected") == 1, tail.output
    # the outage is the control plane's, whichever of tail's calls answered first ("deliveries: reconnected")
    assert "  control plane: reconnected to " in tail.output, tail.output
    assert tail.interrupt() == 0
