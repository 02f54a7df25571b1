"""The generated Next.js and Express handlers verify every form hookyard sends for their
provider: the provider's own signature header under its real name and its neutral one (a verbatim
``/v1`` replay of each), and a replay re-signed with ``resign_with`` (the signature in the provider's own
header, replay's default ``signature_header``, or in ``x-signature`` when named); a wrong signature (a wrong
``resign_with``, or a changed body under the captured signature) is refused with 401.

Real edge, control and worker processes learn the schemas from triggered samples; the handlers come from
``GET /v1/schemas/{id}/types?framework=...``, are compiled by ``tsc --strict`` and served by Node on
loopback ports (the Express app as it is, the Next.js route's ``POST`` behind ``node:http``); every request
they judge is a real ``/v1`` replay. The npm packages are those of ``tests/node``."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import make_account
from tests.onboarding.clirun import until
from tests.schemas.support import node_work, tsc
from tests.stack import Stack

pytestmark = pytest.mark.slow

SECRET = "whsec_" + base64.b64encode(b"the-apps-webhook-secret-32-bytes").decode()
WRONG = "whsec_" + base64.b64encode(b"somebody-elses-secret-32-bytes!!").decode()
SAMPLES = {"payments": "invoice.paid", "identity": "user.created", "commerce": "orders/paid", "code_host": "push"}
FRAMEWORKS = ("next", "express")


SERVE = """
import http from "node:http";
import { renameSync, writeFileSync } from "node:fs";

const HOP = new Set(["host", "connection", "content-length", "transfer-encoding", "keep-alive"]);

function listening(server) {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
}

// A Next.js route handler behind node:http, as the Next server calls it: a web Request in, a Response out.
function nextServer(POST) {
  return http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (!HOP.has(name) && value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    const response = await POST(
      new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: Buffer.concat(chunks) }),
    );
    res.writeHead(response.status, { "content-type": "application/json" });
    res.end(Buffer.from(await response.arrayBuffer()));
  });
}

const ports = {};
for (const name of JSON.parse(process.env.HANDLERS)) {
  const module = await import(`./out/${name}.js`);
  ports[name] = await listening(name.endsWith("_next") ? nextServer(module.POST) : http.createServer(module.app));
}
// Written whole, then renamed: the test polls for the file and must never read it half written.
writeFileSync("ports.json.tmp", JSON.stringify(ports));
renameSync("ports.json.tmp", "ports.json");
"""


@pytest.fixture
async def learned(stack: Stack, database_url: str) -> AsyncIterator[tuple[httpx.Client, dict[str, Any]]]:
    """An endpoint verifying with SECRET that received each provider's sample under both header names, and
    one without verification that received an unsigned request; their schemas learned. (events by provider
    and form, schema ids by provider)"""
    # Ten test webhooks and a replay per provider, form and handler in a row: past an account's default send
    # burst (tests/security/test_rate_limits.py is where that limit is tried).
    stack.env["HOOKYARD_SEND_RATE_BURST"] = "1000"
    stack.start_edge()
    stack.start_control()
    stack.start_worker()
    account = await make_account(database_url)
    with httpx.Client(base_url=stack.control_url, headers=account.headers, timeout=30) as api:
        endpoint = api.post("/v1/endpoints", json={"name": "handlers"}).json()
        ep = endpoint["id"]
        config = {"hmac_enabled": True, "secret": SECRET, "on_failure": "accept_log"}
        assert api.patch(f"/v1/endpoints/{ep}/auth-config", json=config).status_code == 200
        events: dict[tuple[str, str], str] = {}
        for provider, event_type in SAMPLES.items():
            for headers in ("provider", "neutral"):
                sent = api.post(
                    f"/v1/endpoints/{ep}/test-webhook",
                    json={"provider": provider, "event_type": event_type, "headers": headers},
                ).json()
                assert sent["accepted"], sent
                events[provider, headers] = sent["event_id"]
        plain = api.post("/v1/endpoints", json={"name": "unverified"}).json()  # a failed check is not learned
        unsigned = httpx.post(plain["ingest_url"], json={"order": 7, "note": "no signature"})
        events["endpoint", "unsigned"] = unsigned.json()["id"]

        def schemas() -> dict[str, str] | None:
            found = {s["provider"] or "endpoint": s["id"] for s in api.get("/v1/schemas").json()["schemas"]}
            return found if len(found) == len(SAMPLES) + 1 else None

        yield api, {"events": events, "schemas": until(schemas, what="a schema per provider")}


@pytest.mark.usefixtures("node_modules")
def test_generated_handlers_accept_every_form_hookyard_sends_and_refuse_a_wrong_signature(learned) -> None:
    api, found = learned
    events, schemas = found["events"], found["schemas"]
    server: subprocess.Popen[bytes] | None = None
    with node_work() as work:  # removed after, with what the server wrote there
        try:
            handlers = []
            for provider, schema_id in schemas.items():
                for framework in FRAMEWORKS:
                    code = api.get(f"/v1/schemas/{schema_id}/types", params={"framework": framework})
                    assert code.status_code == 200, code.text
                    handlers.append(f"{provider}_{framework}")
                    (work / f"{handlers[-1]}.ts").write_text(code.text)
            tsc(work)
            (work / "serve.mjs").write_text(SERVE)
            env = {**os.environ, "WEBHOOK_SECRET": SECRET, "HANDLERS": json.dumps(handlers)}
            log = open(work / "serve.log", "wb")  # noqa: SIM115 - closed right after the start
            server = subprocess.Popen(["node", "serve.mjs"], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            ports_file = work / "ports.json"
            until(lambda: ports_file.exists() or server.poll() is not None, what="the handlers listening")
            assert ports_file.exists(), (work / "serve.log").read_text()
            ports = json.loads(ports_file.read_text())

            def replay(event_id: str, url: str, **options: Any) -> int | None:
                done = api.post(f"/v1/events/{event_id}/replay", json={"url": url, **options})
                assert done.status_code == 200, done.text
                return done.json()["status"]

            got, expected = {}, {}
            for name in handlers:
                provider, framework = name.rsplit("_", 1)
                route = "/api/webhooks" if framework == "next" else f"/webhooks/{provider}"
                url = f"http://127.0.0.1:{ports[name]}{route}"
                forms = ("unsigned",) if provider == "endpoint" else ("provider", "neutral")
                for form in forms:
                    event_id = events[provider, form]
                    got[name, form, "verbatim"] = replay(event_id, url)
                    got[name, form, "resign_with"] = replay(event_id, url, resign_with=SECRET)
                    got[name, form, "in x-signature"] = replay(
                        event_id, url, resign_with=SECRET, signature_header="x-signature"
                    )
                    got[name, form, "wrong resign_with"] = replay(event_id, url, resign_with=WRONG)
                    got[name, form, "changed body"] = replay(event_id, url, body='{"forged": true}')
                    verbatim = 401 if form == "unsigned" else 200
                    expected.update(
                        {
                            (name, form, "verbatim"): verbatim,
                            (name, form, "resign_with"): 200,
                            (name, form, "in x-signature"): 200,
                            (name, form, "wrong resign_with"): 401,
                            (name, form, "changed body"): 401,
                        }
                    )
            assert {k: v for k, v in got.items() if v != expected[k]} == {}
            assert len(got) == 2 * (4 * 2 + 1) * 5
        finally:
            if server is not None:
                server.send_signal(signal.SIGTERM)
                server.wait(10)
