"""A destination URL that is itself the secret (a chat incoming webhook's path, an
``access_token`` query parameter, ``user:password@``) is named by id and ``scheme://host[:port]`` only in
logs (both formats), metric labels and error messages; only the destination record itself holds it.

A real run: a loopback destination, rule deliveries through the deliver worker (a 500 then a 200, and a
port nobody listens on, retried until it gives up), replays over /v1 and destination tests, every log
record of it captured and formatted by both of the processes' formatters, then grepped for every piece of
the URL. The pieces are distinctive so that a hit is never an id that happens to contain "pw" or "Q".
"""

from __future__ import annotations

import json
import logging

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from control.db.context import Context
from control.delivery import egress
from control.delivery.send import send
from control.support.metrics import CONTROL, WORKER
from shared.logs import JsonFormatter, PlainFormatter, redact, safe_url
from shared.settings import Settings
from tests.conftest import Account
from tests.destination import FAST_DELIVERY, Destination, Reply, deliveries_of, running, settled
from tests.events_support import Ev, store, store_task
from tests.helpers import create_endpoint, db
from tests.stack import free_port

USER, PASSWORD = "alice", "pw-5kq1x"
PATH_SECRET = "SECRET-7f3bq"
TOKEN = "Q-9d2e7w"
PIECES = (USER, PASSWORD, "services/T0/B0", PATH_SECRET, "access_token", TOKEN)


def secret_url(port: int) -> str:
    return f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/services/T0/B0/{PATH_SECRET}?access_token={TOKEN}"


def leaks(text: str) -> list[str]:
    return [piece for piece in PIECES if piece in text]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, log_activity=True, **FAST_DELIVERY)


async def _destination(client: AsyncTestClient, account: Account, endpoint_id: str, url: str) -> dict[str, str]:
    created = await client.post(
        f"/v1/endpoints/{endpoint_id}/destinations", json={"url": url, "forward_all": True}, headers=account.headers
    )
    assert created.status_code == 201, created.text
    body = created.json()
    # The record keeps the URL (the owner's data) but its user info, which is Basic auth now, sealed.
    assert body["url"] == url.replace(f"{USER}:{PASSWORD}@", "")
    assert body["auth"] == {"type": "basic", "username": USER}
    return {"destination": body["id"], "rule": body["rule"]["id"]}


async def test_a_run_with_a_secret_url_logs_and_reports_only_its_origin(
    settings: Settings,
    ctx: Context,
    client: AsyncTestClient,
    account: Account,
    destination: Destination,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    working, dead = secret_url(destination.port), secret_url(free_port())
    endpoint = (await create_endpoint(client, account.headers))["id"]
    ok = await _destination(client, account, endpoint, working)
    down = await _destination(client, account, endpoint, dead)
    ev = Ev(endpoint_id=endpoint)
    async with db(settings.database_url) as conn:
        await store(conn, None, None, [ev])
        tasks = {
            name: await store_task(
                conn,
                endpoint_id=endpoint,
                event_id=ev.id,
                received_at=ev.received_at,
                rule_id=made["rule"],
                destination_id=made["destination"],
            )
            for name, made in (("ok", ok), ("down", down))
        }
    destination.reply(Reply(status=500), default=Reply(status=200))
    async with running(ctx):
        await settled(ctx, tasks["ok"], "succeeded")
        await settled(ctx, tasks["down"], "failed")
    answers = [
        await client.post(f"/v1/events/{ev.id}/replay", json={"url": working}, headers=account.headers),
        await client.post(f"/v1/events/{ev.id}/replay", json={"url": dead}, headers=account.headers),
        await client.post(f"/v1/destinations/{ok['destination']}/test", headers=account.headers),
        await client.post(f"/v1/destinations/{down['destination']}/test", headers=account.headers),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
    assert [a.json()["success"] for a in answers] == [True, False, True, False]
    assert all(r.target == f"/services/T0/B0/{PATH_SECRET}?access_token={TOKEN}" for r in destination.requests)

    # Error messages: the outcomes' and every stored one (delivery records, the tasks' last error).
    errors = [a.json()["error"] or "" for a in answers]
    records = await deliveries_of(ctx, ev.id)
    assert len(records) >= 2 + 3  # the 500 and the 200, three attempts at the dead port (replays and tests too)
    errors += [r["error"] or "" for r in records]
    async with ctx.pool.acquire() as conn:
        errors += [r["last_error"] or "" for r in await conn.fetch("SELECT last_error FROM delivery_tasks")]
    assert any(e.startswith("connection failed") for e in errors)
    for error in errors:
        assert not leaks(error), error

    # Logs, as each of the two formats writes them.
    plain, structured = PlainFormatter(), JsonFormatter()
    for record in caplog.records:
        for line in (plain.format(record), structured.format(record)):
            assert not leaks(line), line
        json.loads(structured.format(record))
    activity = [r.getMessage() for r in caplog.records if r.name == "hookyard.activity"]
    assert len(activity) == 2 + 3  # the 500 and the 200; three attempts at the dead port
    named = {f"-> {ok['destination']} {safe_url(working)}  ", f"-> {down['destination']} {safe_url(dead)}  "}
    for shown in activity:
        assert any(n in shown for n in named), shown
    assert any("retry in" in shown for shown in activity)

    # Metric labels: the expositions of both roles after the run.
    for registry in (WORKER, CONTROL):
        exposition = registry.render().decode()
        assert not leaks(exposition), exposition


async def test_an_unparsable_url_is_reported_by_its_origin() -> None:
    """httpx's own message quotes the piece it could not parse, here a password where a port belongs."""
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{PASSWORD}/services/T0/B0/{PATH_SECRET}?access_token={TOKEN}"
    async with egress.client("any", timeout_s=2, connect_timeout_s=2, max_connections=1) as transport:
        outcome = await send(transport, "POST", url, {}, b"{}", total_timeout_s=5)
    assert outcome.status is None
    assert outcome.permanent
    assert outcome.error == "invalid request: not a valid URL (http://127.0.0.1)"


def test_safe_url_keeps_scheme_host_and_port_only() -> None:
    assert safe_url(secret_url(8443)) == "http://127.0.0.1:8443"
    assert safe_url(f"HTTPS://{USER}:{PASSWORD}@Hooks.Example/services/T0/B0/{PATH_SECRET}") == "https://hooks.example"
    assert safe_url("https://[::1]:9/x?access_token=Q") == "https://[::1]:9"
    assert safe_url(f"https://{USER}:{PASSWORD}/x") == "https://alice"  # a port that is no number is not shown
    assert safe_url("http://[::1/x") == "(an invalid URL)"
    assert safe_url("not a url") == "(a URL without a host)"


def test_redaction_drops_the_user_info_of_any_url() -> None:
    """The net under the rule: an exception that quotes a whole URL still does not log its password."""
    line = redact(f"boom while sending to {secret_url(443)} (and redis://:{PASSWORD}@cache:6379/0)")
    assert USER not in line
    assert PASSWORD not in line
    assert "@127.0.0.1:443/" in line
