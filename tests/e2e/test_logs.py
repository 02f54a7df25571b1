"""Structured logs through a whole run of real processes (control, a two-worker edge, flush and deliver
workers) at debug level: every line is one JSON object, lines carry the request, event, endpoint and
delivery ids where they exist, and no secret the run used (API key, platform, provider and destination
signing secrets, signatures sent, the encryption key) appears anywhere in any log."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import httpx
import pytest

from shared.logs import redact
from shared.settings import Settings
from tests.conftest import make_account
from tests.destination import Destination
from tests.stack import Stack

pytestmark = pytest.mark.slow

PROVIDER_SECRET = "code-host-secret-for-the-log-test-0123456789"
RESIGN_SECRET = "whsec_cmVzaWduLXNlY3JldC1mb3ItdGhlLWxvZy10ZXN0"


def lines(log_dir: Path) -> list[tuple[str, str]]:
    return [
        (path.name, line)
        for path in sorted(log_dir.glob("*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if line.strip()
    ]


async def test_a_full_run_logs_json_with_ids_and_no_secret(
    settings: Settings, tmp_path: Path, destination: Destination
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    stack = Stack(settings, logs, HOOKYARD_LOG_FORMAT="json", HOOKYARD_LOG_LEVEL="debug")
    secrets: list[str] = [*settings.encryption_keys, *(k.split(":", 1)[1] for k in settings.encryption_keys)]
    try:
        stack.start_control()
        stack.start("edge", "edge", "--port", str(stack.edge_port), "--workers", "2", port=stack.edge_port)
        stack.start_worker("worker", "flush", "deliver")
        account = await make_account(settings.database_url)
        secrets.append(account.key)
        async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers) as api:
            endpoint = (await api.post("/v1/endpoints", json={"name": "logs"})).json()
            secrets.append(endpoint["signing_secret"])
            auth = await api.patch(
                f"/v1/endpoints/{endpoint['id']}/auth-config",
                json={"hmac_enabled": True, "secret": PROVIDER_SECRET, "on_failure": "reject"},
                headers={"x-request-id": "support-ticket-42"},
            )
            assert auth.status_code == 200, auth.text
            assert auth.headers["x-request-id"] == "support-ticket-42"
            secrets.append(PROVIDER_SECRET)
            created = await api.post(
                f"/v1/endpoints/{endpoint['id']}/destinations", json={"url": destination.url, "forward_all": True}
            )
            assert created.status_code == 201, created.text
            if "signing_secret" in created.json():  # a destination's own secret (signed rule deliveries)
                secrets.append(created.json()["signing_secret"])

            body = b'{"action":"opened","number":7}'
            signature = "sha256=" + hmac.new(PROVIDER_SECRET.encode(), body, hashlib.sha256).hexdigest()
            secrets.append(signature.removeprefix("sha256="))
            headers = {"x-github-event": "issues", "x-github-delivery": "d-1", "x-hub-signature-256": signature}
            async with httpx.AsyncClient() as provider:
                ok = await provider.post(endpoint["ingest_url"], content=body, headers=headers)
                assert ok.status_code == 200, ok.text
                bad = await provider.post(
                    endpoint["ingest_url"],
                    content=body,
                    headers={**headers, "x-hub-signature-256": "sha256=" + "0" * 64},
                )
                assert bad.status_code == 401
            event_id = ok.json()["id"]
            await destination.wait_for(1, timeout=20)
            replay = await api.post(
                f"/v1/events/{event_id}/replay", json={"url": destination.url, "resign_with": RESIGN_SECRET}
            )
            assert replay.status_code == 200, replay.text
            secrets.append(RESIGN_SECRET)
            for received in await destination.wait_for(2, timeout=20):
                secrets += [v for k, v in received.headers.items() if "signature" in k]
            rotated = await api.post(f"/v1/endpoints/{endpoint['id']}/auth-config/rotate-secret")
            secrets.append(rotated.json()["signing_secret"])
            wrong = await api.get("/v1/endpoints", headers={"authorization": "Bearer hy_live_" + "x" * 32})
            assert wrong.status_code == 401
    finally:
        stack.stop_all()

    found = lines(logs)
    assert found
    parsed = []
    for name, line in found:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"{name}: not a JSON line: {line[:200]}")
    for name, line in found:
        for secret in secrets:
            assert secret not in line, f"{name} logged a secret: {line[:300]}"
    assert {"time", "level", "logger", "message"} <= set(parsed[0])
    assert any(p.get("request_id") == "support-ticket-42" and p.get("endpoint_id") == endpoint["id"] for p in parsed)
    assert any(
        p.get("delivery_id") and p.get("event_id") == event_id and p.get("endpoint_id") == endpoint["id"]
        for p in parsed
    )


def test_redaction_catches_secret_shapes() -> None:
    for secret in (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "hy_live_0123456789abcdefABCDEF0123456789",
        "hy_tmp_0123456789abcdefABCDEF0123456789",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "t=1,v1=" + "ab" * 32,
        "sha256=" + "cd" * 32,
        "hyenc:v1:k1:AAAAbbbbCCCCdddd",
    ):
        assert secret not in redact(f"header was {secret}!")
