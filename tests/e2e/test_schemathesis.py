"""schemathesis, every check, over the OpenAPI document of a running control plane, with real ids.

The document must be exactly as strict as the server: a request it calls valid is accepted (or refused only
for a documented reason: 401, 403, 404, 409, 429), one it calls invalid is refused with a 4xx, no request
answers 5xx, every answer matches its documented schema, status and content type, OPTIONS and 405 list the
path's methods. What the document cannot state is handled, narrowly and with the reason, by
``tests/e2e/schemathesis_hooks.py``.

A real ``hookyard control`` (granian) with an edge and a worker: the ids schemathesis is given (an endpoint,
a destination, a rule, an allowlist entry, an event captured through the edge, cursors of real pages) make
its requests reach past 404. DELETE operations get ids of their own, so the rest keep working. Deterministic
generation, a few examples per operation: about 40 s.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from control.support.page_cursors import encode_cursor
from shared.settings import Settings
from tests.conftest import make_account
from tests.destination import Destination
from tests.stack import Stack

pytestmark = [pytest.mark.slow, pytest.mark.long]

MAX_EXAMPLES = 5
REPO = Path(__file__).resolve().parents[2]


def _schemathesis() -> str:
    return shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")


def _ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code in (200, 201), resp.text
    return resp.json()


def _seed(control_url: str, key: str, sink_url: str) -> dict[str, str]:
    """Real objects for schemathesis to use: one of each kind to read and change, one more to delete."""
    with httpx.Client(base_url=control_url, headers={"Authorization": f"Bearer {key}"}, timeout=10) as api:
        endpoint = _ok(api.post("/v1/endpoints", json={"name": "schemathesis"}))
        doomed = _ok(api.post("/v1/endpoints", json={"name": "deleted by schemathesis"}))
        path = f"/v1/endpoints/{endpoint['id']}"
        destinations = [_ok(api.post(f"{path}/destinations", json={"url": sink_url, "name": n})) for n in "ab"]
        tree = {"op": "AND", "children": []}
        rules = [
            _ok(api.post(f"{path}/rules", json={"name": n, "condition_tree": tree, "destination_ids": [d["id"]]}))
            for n, d in zip("ab", destinations, strict=True)
        ]
        # 127.0.0.0/8 keeps the edge accepting the events sent from here below.
        entries = [_ok(api.post(f"{path}/allowlist", json={"cidr": c})) for c in ("127.0.0.0/8", "192.0.2.0/24")]
        labels = [_ok(api.post(f"{path}/labels", json={"path": "type", "output_key": k})) for k in ("a", "b")]
        for i in range(2):
            assert httpx.post(f"{endpoint['ingest_url']}/x", json={"type": "t", "i": i}).status_code == 200
        deadline = time.monotonic() + 30
        while not (page := _ok(api.get(f"{path}/events", params={"limit": 1})))["next_cursor"]:
            assert time.monotonic() < deadline, "the events sent through the edge were not stored"
            time.sleep(0.05)
        while not (schemas := _ok(api.get(f"{path}/schemas"))["schemas"]):  # the learn loop learns them after
            assert time.monotonic() < deadline, "no schema was learned from the events stored"
            time.sleep(0.05)
        schema_id = schemas[0]["id"]
        for _ in range(2):
            _ok(api.post(f"/v1/destinations/{destinations[0]['id']}/test"))
        deliveries = _ok(api.get(f"{path}/deliveries", params={"limit": 1}))
        while not (routed := _ok(api.get(f"{path}/deliveries", params={"source": "rule", "limit": 1}))["deliveries"]):
            assert time.monotonic() < deadline, "the events were not delivered by their rules"
            time.sleep(0.05)
        retry = api.post(f"{path}/deliveries/retry", params={"success": "false"})
        assert retry.status_code == 202, retry.text
        position = api.get(f"{path}/events/wait", params={"after": "now", "timeout": 1}).headers["hookyard-cursor"]
    return {
        "endpoint_id": endpoint["id"],
        "doomed_endpoint_id": doomed["id"],
        "destination_id": destinations[0]["id"],
        "doomed_destination_id": destinations[1]["id"],
        "rule_id": rules[0]["id"],
        "doomed_rule_id": rules[1]["id"],
        "entry_id": entries[0]["id"],
        "doomed_entry_id": entries[1]["id"],
        "label_id": labels[0]["id"],
        "doomed_label_id": labels[1]["id"],
        "event_id": page["events"][0]["id"],
        "event_cursor": page["next_cursor"],
        "schema_id": schema_id,
        "delivery_cursor": deliveries["next_cursor"],
        "delivery_id": routed[0]["id"],
        "retry_id": retry.json()["id"],
        "wait_position": position,
        # No alert has fired here, so no page hands out a cursor: one the server's own encoder makes for its
        # list (a made-up token of the right shape is a 400, which the document cannot state).
        "alert_cursor": encode_cursor("alerts", datetime.now(UTC), "alert_01M89VA30593X7C0EME27ZTGF2"),
        "erasure_cursor": "erase_01M89VA30593X7C0EME27ZTGF2",  # a page of erasures ends at a job's id
    }


def _config(key: str, ids: dict[str, str]) -> str:
    def operation(operation_id: str, **parameters: object) -> str:
        values = ", ".join(f'"{name}" = {_toml(value)}' for name, value in parameters.items())
        return f'[[operations]]\ninclude-operation-id = "{operation_id}"\nparameters = {{ {values} }}\n'

    return f"""
hooks = "tests.e2e.schemathesis_hooks"

[cache]
enabled = false

[generation]
max-examples = {MAX_EXAMPLES}
deterministic = true

[headers]
Authorization = "Bearer {key}"

[parameters]
"path.endpoint_id" = "{ids["endpoint_id"]}"
"path.event_id" = "{ids["event_id"]}"
"path.destination_id" = "{ids["destination_id"]}"
"path.rule_id" = "{ids["rule_id"]}"
"path.entry_id" = "{ids["entry_id"]}"
"path.label_id" = "{ids["label_id"]}"
"path.schema_id" = "{ids["schema_id"]}"
"path.delivery_id" = "{ids["delivery_id"]}"
"path.retry_id" = "{ids["retry_id"]}"

{operation("DeleteEndpoint", **{"path.endpoint_id": ids["doomed_endpoint_id"]})}
{operation("DeleteDestination", **{"path.destination_id": ids["doomed_destination_id"]})}
{operation("DeleteRule", **{"path.rule_id": ids["doomed_rule_id"]})}
{operation("DeleteAllowlistEntry", **{"path.entry_id": ids["doomed_entry_id"]})}
{operation("DeleteLabelRule", **{"path.label_id": ids["doomed_label_id"]})}
{operation("ListEvents", **{"query.cursor": ids["event_cursor"]})}
{operation("ListDeliveries", **{"query.cursor": ids["delivery_cursor"]})}
{operation("ListAlerts", **{"query.cursor": ids["alert_cursor"]})}
{operation("ListErasures", **{"query.cursor": ids["erasure_cursor"]})}
# Every wait that matches nothing lasts its whole timeout: the shortest one, and no coverage phase (whose
# dozens of filter combinations would each wait a second).
{operation("WaitForEvent", **{"query.timeout": 1, "query.after": ids["wait_position"]})}phases.coverage.enabled = false
# A test webhook is a real signed send through the edge, stored before it is answered. The coverage phase's
# valid cases are every provider and alias with each of its event types and both header families: 309 sends,
# 24 s of answers in a run of 170 s. The samples of each are checked in tests/unit (test_samples,
# test_provider_samples) and through real processes in tests/onboarding. Here: its invalid cases (each
# refused with the error envelope), and valid ones from the other phases.
[[operations]]
include-operation-id = "SendTestWebhook"
phases.coverage.generation.mode = "negative"
"""


def _toml(value: object) -> str:
    return str(value) if isinstance(value, int) else f'"{value}"'


async def test_the_control_plane_keeps_to_its_openapi_document(
    settings: Settings, database_url: str, tmp_path: Path, destination: Destination
) -> None:
    account = await make_account(database_url)
    # Thousands of requests in a few seconds: the per-key rate limit, the account's outbound sends (replays,
    # tests, retries), and the per-address one of /api/start and /api/register would answer most of them 429.
    stack = Stack(
        settings,
        tmp_path,
        HOOKYARD_RATE_LIMIT_PER_S=1_000_000,
        HOOKYARD_RATE_LIMIT_BURST=1_000_000,
        HOOKYARD_SEND_RATE_PER_MIN=1_000_000,
        HOOKYARD_SEND_RATE_BURST=1_000_000,
        HOOKYARD_START_RATE_PER_MIN=1_000_000,
    )
    try:
        stack.start_control()
        stack.start_edge()
        stack.start_worker()
        ids = _seed(stack.control_url, account.key, destination.url)
        config = tmp_path / "schemathesis.toml"
        config.write_text(_config(account.key, ids))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "HOOKYARD_ST_DESTINATION_ID": ids["destination_id"],
            "HOOKYARD_ST_SINK_URL": destination.url,
            "HOOKYARD_ST_DROPPED_LOG": str(tmp_path / "dropped.txt"),
        }
        command = [_schemathesis(), "--config-file", str(config), "run", "--checks", "all"]
        result = subprocess.run(
            [*command, f"{stack.control_url}/schema/openapi.json"],
            cwd=tmp_path,  # its caches and reports stay out of the repository
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        stack.stop_all()
    (tmp_path / "schemathesis.out").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, f"schemathesis found failures:\n{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
    selected = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", result.stdout)
    assert selected is not None, result.stdout[-5000:]
    assert len(set(selected.groups())) == 1, f"not every operation was tested: {selected.group(0)}"


def test_only_the_test_webhook_sends_are_left_out_of_the_coverage_phase() -> None:
    """Its valid cases are real sends (a fifth of the contract test's time, and checked elsewhere); every other
    operation keeps both kinds of coverage case, and it keeps its invalid ones."""
    config = tomllib.loads(_config("key", collections.defaultdict(lambda: "an_id")))
    narrowed = {
        entry["include-operation-id"]: entry["phases"]["coverage"]
        for entry in config["operations"]
        if "phases" in entry
    }
    assert narrowed == {"WaitForEvent": {"enabled": False}, "SendTestWebhook": {"generation": {"mode": "negative"}}}
    assert "phases" not in config
    assert "mode" not in config["generation"]
