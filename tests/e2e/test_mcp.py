"""/mcp end to end: the official MCP client over Streamable HTTP against real processes.

One stack for the module (a control plane with two granian workers, so consecutive calls of one client land
on different processes, an edge, a worker) and a real destination server; every test isolates itself with
fresh accounts. Every tool is called; a signed sample goes through the edge, is verified, captured, waited
for, forwarded by a rule and replayed; errors carry the /v1 envelope; keys see their own account only, a
temporary ``hy_tmp_`` token its own endpoint only.

One module, so one stack in any run (pytest-xdist's loadfile hands a module to one worker); the MCP client
helpers are in mcp_support.py, its stack and shared inputs in mcp_rig.py.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from control.mcp.registry import TOOLS
from tests.conftest import Account, make_account
from tests.destination import Destination
from tests.e2e import mcp_rig
from tests.e2e.mcp_rig import refused_by_both
from tests.e2e.mcp_support import NO_SUCH_ENDPOINT, NO_SUCH_EVENT, connected, iso, temporary, until, v1_request
from tests.helpers import assert_error, wait_for
from tests.stack import Stack

pytestmark = pytest.mark.slow


# The module's rig (one database, one stack, one sink), bound here by name: tests/e2e/mcp_rig.py.
database_url = mcp_rig.database_url
module_settings = mcp_rig.module_settings
mcp_stack = mcp_rig.mcp_stack
sink = mcp_rig.sink


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_lists_every_tool_with_schemas_and_hints(mcp_stack: Stack, account: Account, mode: str) -> None:
    """Both protocol eras (the per-request 2026 protocol and the initialize handshake) list the same tools."""
    async with connected(mcp_stack, account.key, mode) as tools:
        listed = {tool.name: tool for tool in (await tools.client.list_tools()).tools}
    assert set(listed) == set(TOOLS)
    for tool in listed.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is None  # a result is the record's JSON, as /v1's (ADR 0092)
        assert tool.annotations is not None
    assert listed["list_events"].annotations.read_only_hint is True
    assert listed["delete_endpoint"].annotations.destructive_hint is True
    assert listed["replay_event"].annotations.open_world_hint is True
    assert listed["update_rule"].annotations.idempotent_hint is True
    assert listed["wait_for_event"].input_schema["properties"]["timeout"]["anyOf"][0]["maximum"] == 55  # or null


async def test_every_tool_over_streamable_http(mcp_stack: Stack, account: Account, sink: Destination) -> None:
    started = datetime.now(UTC) - timedelta(seconds=1)
    async with connected(mcp_stack, account.key) as t:
        listed = {tool.name for tool in (await t.client.list_tools()).tools}

        endpoint = await t.ok("create_endpoint", name="orders", external_ref=f"orders-{uuid.uuid4().hex[:8]}")
        ep = endpoint["id"]
        assert endpoint["signing_secret"].startswith("whsec_")
        assert [
            e["id"] for e in (await t.ok("list_endpoints", external_ref=endpoint["external_ref"]))["endpoints"]
        ] == [ep]
        assert (await t.ok("get_endpoint", endpoint_id=ep))["ingest_url"] == endpoint["ingest_url"]
        assert (await t.ok("update_endpoint", endpoint_id=ep, environment="staging"))["environment"] == "staging"
        link = await t.ok("create_inbox_link", endpoint_id=ep)
        assert f"/inbox/{ep}?link=" in link["url"]
        assert (await t.ok("rotate_inbox_links", endpoint_id=ep))["url"] != link["url"]

        # Verification on, rejecting: the sample must carry a valid signature to be captured at all.
        await t.ok("update_auth_config", endpoint_id=ep, hmac_enabled=True, on_failure="reject")
        assert (await t.ok("get_auth_config", endpoint_id=ep))["hmac_enabled"] is True
        rotated = await t.ok("rotate_signing_secret", endpoint_id=ep)
        assert rotated["signing_secret"] != endpoint["signing_secret"]
        entry = await t.ok("add_allowlist_entry", endpoint_id=ep, cidr="127.0.0.0/8")
        assert [e["cidr"] for e in (await t.ok("list_allowlist", endpoint_id=ep))["allowlist"]] == ["127.0.0.0/8"]

        destination = await t.ok("create_destination", endpoint_id=ep, url=sink.url, name="sink", forward_all=True)
        dst = destination["id"]
        assert destination["rule"]["destination_ids"] == [dst]
        assert [d["id"] for d in (await t.ok("list_destinations", endpoint_id=ep))["destinations"]] == [dst]
        assert (await t.ok("get_destination", destination_id=dst))["url"] == sink.url
        await t.ok("update_destination", destination_id=dst, headers={"x-team": "billing"})
        rotated = await t.ok("rotate_destination_secret", destination_id=dst, overlap_s=60)
        assert rotated["signing_secret"].startswith("whsec_")
        assert rotated["previous_secret_expires_at"] is not None
        disabled = await t.ok("disable_destination", destination_id=dst, reason="maintenance")
        assert (disabled["state"], disabled["disabled_reason"]) == ("disabled", "maintenance")
        assert (await t.ok("enable_destination", destination_id=dst))["state"] == "enabled"
        before = len(sink.requests)
        assert (await t.ok("test_destination", destination_id=dst))["success"] is True
        assert (await sink.wait_for(before + 1))[-1].headers["x-hookyard-test"] == "true"

        tree = {"op": "AND", "children": [{"field": "body.type", "operator": "equals", "value": "charge.refunded"}]}
        rule = await t.ok("create_rule", endpoint_id=ep, name="refunds", condition_tree=tree, destination_ids=[dst])
        assert {r["id"] for r in (await t.ok("list_rules", endpoint_id=ep))["rules"]} == {
            rule["id"],
            destination["rule"]["id"],
        }
        assert (await t.ok("get_rule", rule_id=rule["id"]))["condition_tree"] == tree
        assert (await t.ok("update_rule", rule_id=rule["id"], active=False))["active"] is False
        assert (await t.ok("delete_rule", rule_id=rule["id"]))["deleted"] is True

        label = await t.ok("create_label_rule", endpoint_id=ep, path="data.object.currency", output_key="currency")
        assert [r["id"] for r in (await t.ok("list_label_rules", endpoint_id=ep))["labels"]] == [label["id"]]
        assert (await t.ok("get_label_rule", label_id=label["id"]))["output_key"] == "currency"
        assert (await t.ok("update_label_rule", label_id=label["id"], color="#00aa00"))["color"] == "#00aa00"

        # A signed sample through the edge: verified, captured, found by the long poll, forwarded by the rule.
        before = len(sink.requests)
        waiting = asyncio.ensure_future(t.ok("wait_for_event", endpoint_id=ep, provider="payments", since=iso(started)))
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="payments", event_type="charge.refunded")
        assert (sent["status"], sent["accepted"]) == (200, True), sent
        assert sent["response"] == {"ok": True, "id": sent["event_id"]}
        assert sent["signature_header"] == "stripe-signature"  # the real provider's names by default
        waited = await asyncio.wait_for(waiting, 30)
        assert waited["timed_out"] is False
        event = waited["event"]
        assert event["id"] == sent["event_id"]
        assert (event["provider"], event["event_type"]) == ("payments", "charge.refunded")
        assert event["idempotency_key"] == sent["idempotency_key"]
        assert event["signature_valid"] is True
        assert [(x["key"], x["value"], x["color"]) for x in event["labels"]] == [("currency", "usd", "#00aa00")]
        forwarded = (await sink.wait_for(before + 1))[-1]
        assert forwarded.body.decode() == event["body"]
        assert forwarded.headers["x-team"] == "billing"
        assert forwarded.headers["x-hookyard-event-id"] == event["id"]

        listed_events = await t.ok("list_events", endpoint_id=ep, type="charge.refunded", signature_valid=True)
        assert [e["id"] for e in listed_events["events"]] == [event["id"]]
        assert (await t.ok("get_latest_event", endpoint_id=ep, provider="payments"))["id"] == event["id"]

        # Learned schemas: the sample's shape, learned by the learn loop once the flush noted it (ADR 0041).
        async def learned() -> list[dict[str, Any]]:
            return (await t.ok("list_schemas", provider="payments", event_type="charge.refunded"))["schemas"]

        (schema,) = await wait_for(learned, timeout=15)
        sch = schema["id"]
        assert (schema["sample_count"], schema["current_version"]) == (1, 1)
        assert [s["id"] for s in (await t.ok("list_endpoint_schemas", endpoint_id=ep))["schemas"]] == [sch]
        assert (await t.ok("get_schema", schema_id=sch, version="1"))["fields"] == schema["fields"]
        assert [v["version"] for v in (await t.ok("list_schema_versions", schema_id=sch))["versions"]] == [1]
        first = await t.ok("get_schema_diff", schema_id=sch, to="current")
        assert (first["from"], first["to"]) == (0, 1)
        assert {c["change"] for c in first["changes"]} == {"added"}
        zod = await t.ok("get_schema_types", schema_id=sch, lang="zod")
        assert (zod["content_type"], zod["version"]) == ("application/typescript", 1)
        assert "PaymentsChargeRefundedSchema = z.looseObject" in zod["text"]
        keys = await t.ok("get_schema_correlations", schema_id=sch)
        assert (keys["schema_id"], keys["candidates"]) == (sch, [])  # one sample: no field has shown two values
        assert (await t.error("get_schema", schema_id=sch, version="v2"))["code"] == "validation_error"

        async def delivered() -> dict[str, Any] | None:
            got = await t.ok("get_event", event_id=event["id"])
            return got if got["deliveries"] else None

        got = await until(delivered)
        assert got["deliveries"][0]["success"] is True
        rule_deliveries = await t.ok("list_deliveries", endpoint_id=ep, source="rule", success=True)
        assert [d["event_id"] for d in rule_deliveries["deliveries"]] == [event["id"]]

        # Stats: the one event and its one rule attempt (the destination test is not counted).
        stats = await t.ok("get_endpoint_stats", endpoint_id=ep)
        assert stats["events"]["total"] == 1
        assert stats["events"]["by_event_type"] == [
            {"provider": "payments", "event_type": "charge.refunded", "count": 1}
        ]
        assert [stats["deliveries"][k] for k in ("attempted", "succeeded", "success_rate")] == [1, 1, 1.0]
        (health,) = stats["destinations"]
        assert (health["destination_id"], health["last_status"], health["circuit"]) == (dst, 200, "closed")
        shown = (await t.ok("get_destination", destination_id=dst))["health"]
        assert shown == {k: v for k, v in health.items() if k not in ("destination_id", "name", "url")}

        # Retries: one delivery again now (here a deliberate resend), and a bulk retry of failures as a job.
        before = len(sink.requests)
        again = await t.ok("retry_delivery", delivery_id=rule_deliveries["deliveries"][0]["id"])
        assert (again["previous_status"], again["attempt_number"]) == ("succeeded", 2)
        assert (await sink.wait_for(before + 1))[-1].headers["x-hookyard-delivery-attempt"] == "2"
        job = await t.ok("retry_deliveries", endpoint_id=ep, success=False, type="charge.refunded")
        assert (await t.ok("get_delivery_retry", retry_id=job["id"]))["filters"]["type"] == "charge.refunded"

        # Replay, verbatim: the provider's signature goes out as it came in.
        before = len(sink.requests)
        replayed = await t.ok("replay_event", event_id=event["id"], url=sink.url, headers={"x-replayed": "1"})
        assert (replayed["success"], replayed["status"]) == (True, 200)
        resent = (await sink.wait_for(before + 1))[-1]
        assert resent.body == forwarded.body
        assert resent.headers["stripe-signature"] == forwarded.headers["stripe-signature"]
        assert resent.headers["x-replayed"] == "1"
        replays = await t.ok("list_deliveries", endpoint_id=ep, source="replay")
        assert [d["id"] for d in replays["deliveries"]] == [replayed["id"]]
        # A forward made elsewhere (as hookyard listen makes it), recorded: nothing is sent by hookyard.
        told = await t.ok("record_forward", event_id=event["id"], url="http://localhost:3000/hooks", status=204)
        assert (told["source"], told["response_status"], len(sink.requests)) == ("listen", 204, before + 1)

        # Transforms: a dry run on the event as the destination would see it, then set as its transform.
        source = "function handler(r) { r.headers['x-transformed'] = r.headers['x-team']; return r; }"
        tried = await t.ok("test_transformation", transform=source, event_id=event["id"], destination_id=dst)
        assert (tried["error"], tried["request"]["headers"]["x-transformed"]) == (None, "billing")
        assert (await t.ok("update_destination_transform", destination_id=dst, transform=source))["transform"] == source

        # No event in time is an answer, not an error.
        quiet = await t.ok("wait_for_event", endpoint_id=ep, type="never.sent", timeout=1)
        assert quiet == {"event": None, "timed_out": True, "message": quiet["message"]}
        assert "within 1 s" in quiet["message"]

        # Erasure: a job that removes the events whose field has the value (tests/erasure/ covers it whole).
        erasure = await t.ok("erase_events", endpoint_id=ep, field="body.data.object.customer", value="cus_nobody")
        assert (erasure["state"], erasure["value"]) == ("pending", "cus_nobody")
        assert (await t.ok("get_erasure", erasure_id=erasure["id"]))["field"] == "body.data.object.customer"
        assert [e["id"] for e in (await t.ok("list_erasures", endpoint_id=ep))["erasures"]] == [erasure["id"]]

        assert (await t.ok("delete_allowlist_entry", entry_id=entry["id"]))["deleted"] is True
        assert (await t.ok("delete_label_rule", label_id=label["id"]))["deleted"] is True
        removed = await t.ok("delete_destination", destination_id=dst)
        assert removed["deleted_rule_ids"] == [destination["rule"]["id"]]
        assert (await t.ok("delete_endpoint", endpoint_id=ep)) == {"id": ep, "deleted": True}

        # Operational alerts (tests/alerts/ covers their sending): the alert destination tools and the record.
        made = await t.ok("create_alert_destination", url=sink.url, events=["endpoint.silent"], format="slack")
        assert made["signing_secret"].startswith("whsec_")
        adst = made["id"]
        assert [d["id"] for d in (await t.ok("list_alert_destinations"))["alert_destinations"]] == [adst]
        assert (await t.ok("get_alert_destination", alert_destination_id=adst))["format"] == "slack"
        changed = await t.ok("update_alert_destination", alert_destination_id=adst, events=None)
        assert len(changed["events"]) == 7  # every alert type, destination.disabled included
        rotated = await t.ok("rotate_alert_destination_secret", alert_destination_id=adst)
        assert rotated["signing_secret"] != made["signing_secret"]
        assert (await t.ok("list_alerts", open=True)) == {"alerts": [], "next_cursor": None}
        assert (await t.ok("delete_alert_destination", alert_destination_id=adst))["deleted"] is True

    assert t.called == listed, f"not called: {sorted(listed - t.called)}"


async def test_a_provider_secret_and_custom_header_sign_the_sample(mcp_stack: Stack, account: Account) -> None:
    """With the provider's own secret set, the sample is signed with it (not the platform secret), in the
    endpoint's custom header when it has one; with verification off a sample is still signed."""
    secret = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0IQ=="
    started = datetime.now(UTC) - timedelta(seconds=1)
    async with connected(mcp_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="identity"))["id"]
        for event_type in ("user.created", "session.revoked"):
            await t.ok("update_auth_config", endpoint_id=ep, hmac_enabled=True, on_failure="accept_log", secret=secret)
            sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="identity", event_type=event_type)
            assert sent["accepted"], sent
            event = (await t.ok("wait_for_event", endpoint_id=ep, type=event_type, since=iso(started)))["event"]
            assert (event["signature_valid"], event["signature_failure_reason"]) == (True, None)
            assert event["headers"]["svix-id"] == sent["idempotency_key"]
        await t.ok("update_auth_config", endpoint_id=ep, header_name="X-Acme-Signature", on_failure="reject")
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="code_host", event_type="push")
        assert (sent["status"], sent["signature_header"]) == (200, "x-acme-signature")
        event = (await t.ok("wait_for_event", endpoint_id=ep, type="push", since=iso(started)))["event"]
        assert event["id"] == sent["event_id"]
        assert event["signature_valid"] is True
        assert event["headers"]["x-acme-signature"].startswith("sha256=")


async def test_a_refused_sample_is_an_answer_not_an_error(mcp_stack: Stack, account: Account) -> None:
    """The edge refusing the sample (here: the allowlist) is what the caller is testing: reported, not raised."""
    async with connected(mcp_stack, account.key) as t:
        ep = (await t.ok("create_endpoint", name="locked"))["id"]
        await t.ok("add_allowlist_entry", endpoint_id=ep, cidr="192.0.2.0/24")
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="commerce", event_type="app/uninstalled")
        assert (sent["status"], sent["accepted"], sent["event_id"], sent["error"]) == (403, False, None, None)
        assert sent["response"]["error"]["code"] == "ip_not_allowed"


async def test_errors_carry_the_v1_envelope(mcp_stack: Stack, account: Account) -> None:
    """The same inputs refused by /v1 and by the tool: the same code and, where the same decoder or the same
    service check refuses them, the same message."""
    ep = v1_request(mcp_stack, account, "POST", "/v1/endpoints", json={"name": "errors"}).json()["id"]
    cases = refused_by_both(ep)
    async with connected(mcp_stack, account.key) as t:
        for tool, arguments, method, path, body in cases:
            tool_error = await t.error(tool, **arguments)
            http_error = v1_request(mcp_stack, account, method, path, json=body).json()["error"]
            assert tool_error == http_error, (tool, arguments)
        expected = {
            "create_rule": "invalid_condition_tree",
            "get_event": "not_found",
            "create_endpoint": "validation_error",
        }
        for tool, code in expected.items():
            assert (await t.error(tool, **next(a for n, a, *_ in cases if n == tool)))["code"] == code
        # Refused by the service where /v1's query parser refuses first: same code, the field named.
        for tool, arguments, field in [
            ("list_events", {"endpoint_id": ep, "limit": 0}, "limit"),
            ("wait_for_event", {"endpoint_id": ep, "timeout": 56}, "timeout"),
            ("list_deliveries", {"endpoint_id": ep, "source": "email"}, "source"),
            (
                "send_test_webhook",
                {"endpoint_id": ep, "provider": "payments", "event_type": "orders/paid"},
                "event_type",
            ),
            ("list_events", {"endpoint_id": ep, "signature_valid": "yes"}, "signature_valid"),
            ("get_endpoint", {"endpoint_id": ep, "verbose": True}, "verbose"),
        ]:
            error = await t.error(tool, **arguments)
            assert error["code"] == "validation_error", (tool, error)
            assert error["message"].startswith(f"{field}:"), (tool, error)
        missing = await t.error("get_endpoint")
        assert missing == {"code": "validation_error", "message": "endpoint_id: required field is missing"}


async def test_without_a_valid_key_mcp_is_401_envelope(mcp_stack: Stack) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"accept": "application/json, text/event-stream"}
    for authorization in (None, "Bearer hy_live_" + "x" * 32, "Basic abc", "Bearer hy_tmp_" + "y" * 32):
        sent = {**headers, **({"authorization": authorization} if authorization else {})}
        resp = httpx.post(f"{mcp_stack.control_url}/mcp", json=initialize, headers=sent, timeout=10)
        assert_error(resp, 401, "unauthorized")
        assert resp.headers["www-authenticate"].startswith("Bearer")


async def test_a_key_sees_its_own_account_only(mcp_stack: Stack, account: Account, other_account: Account) -> None:
    async with connected(mcp_stack, account.key) as mine:
        ep = (await mine.ok("create_endpoint", name="private"))["id"]
        sent = await mine.ok("send_test_webhook", endpoint_id=ep, provider="commerce", event_type="orders/create")
        assert sent["accepted"]
    async with connected(mcp_stack, other_account.key) as theirs:
        assert ep not in {e["id"] for e in (await theirs.ok("list_endpoints"))["endpoints"]}
        for tool, arguments in [
            ("get_endpoint", {"endpoint_id": ep}),
            ("update_endpoint", {"endpoint_id": ep, "name": "mine now"}),
            ("delete_endpoint", {"endpoint_id": ep}),
            ("list_events", {"endpoint_id": ep}),
            ("wait_for_event", {"endpoint_id": ep, "timeout": 1}),
            ("get_event", {"event_id": sent["event_id"]}),
            ("replay_event", {"event_id": sent["event_id"], "url": "http://127.0.0.1:9/"}),
            ("get_auth_config", {"endpoint_id": ep}),
            ("get_endpoint_stats", {"endpoint_id": ep}),
            ("send_test_webhook", {"endpoint_id": ep, "provider": "payments", "event_type": "invoice.paid"}),
        ]:
            assert (await theirs.error(tool, **arguments))["code"] == "not_found", tool


async def test_a_read_only_key_reads_but_changes_nothing(mcp_stack: Stack, database_url: str) -> None:
    reader = await make_account(database_url, read_only=True)
    async with connected(mcp_stack, reader.key) as t:
        assert (await t.ok("list_endpoints"))["endpoints"] == []
        for tool, arguments in [
            ("create_endpoint", {"name": "no"}),
            (
                "send_test_webhook",
                {"endpoint_id": NO_SUCH_ENDPOINT, "provider": "payments", "event_type": "invoice.paid"},
            ),
            ("replay_event", {"event_id": NO_SUCH_EVENT, "url": "http://127.0.0.1:9/"}),
        ]:
            assert await t.error(tool, **arguments) == {"code": "forbidden", "message": "this API key is read-only"}


async def test_a_temporary_token_acts_on_its_own_endpoint_only(mcp_stack: Stack, account: Account) -> None:
    token, ep = temporary(mcp_stack)
    theirs = v1_request(mcp_stack, account, "POST", "/v1/endpoints", json={"name": "someone else's"}).json()["id"]
    on_v1 = httpx.get(f"{mcp_stack.control_url}/v1/endpoints", headers={"Authorization": f"Bearer {token}"})
    assert_error(on_v1, 403, "temporary_token")
    started = datetime.now(UTC) - timedelta(seconds=1)
    async with connected(mcp_stack, token) as t:
        endpoints = (await t.ok("list_endpoints"))["endpoints"]
        assert [(e["id"], e["temporary"]) for e in endpoints] == [(ep, True)]
        sent = await t.ok("send_test_webhook", endpoint_id=ep, provider="identity", event_type="user.created")
        assert sent["accepted"], sent
        waited = await t.ok("wait_for_event", endpoint_id=ep, since=iso(started), timeout=20)
        assert waited["event"]["id"] == sent["event_id"]
        assert (await t.ok("get_event", event_id=sent["event_id"]))["event_type"] == "user.created"
        assert (await t.ok("list_events", endpoint_id=ep))["events"][0]["id"] == sent["event_id"]
        for tool, arguments in [
            ("get_endpoint", {"endpoint_id": theirs}),
            ("list_events", {"endpoint_id": theirs}),
            ("send_test_webhook", {"endpoint_id": theirs, "provider": "payments", "event_type": "invoice.paid"}),
            ("delete_endpoint", {"endpoint_id": theirs}),
        ]:
            assert (await t.error(tool, **arguments))["code"] == "not_found", tool
        # It owns what /api/start made for it, and makes nothing more (the service's rule, as on every route).
        assert (await t.error("create_endpoint", name="more"))["code"] == "temporary_token"
    async with connected(mcp_stack, account.key) as owner:
        assert (await owner.error("get_endpoint", endpoint_id=ep))["code"] == "not_found"


async def test_stateless_no_session_and_any_worker_answers(mcp_stack: Stack, account: Account) -> None:
    """No ``Mcp-Session-Id``: a call needs nothing from an earlier request, so any process can answer it."""
    headers = {**account.headers, "accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    with httpx.Client(base_url=mcp_stack.control_url, headers=headers, timeout=10) as http:
        first = http.post("/mcp", json=initialize)
        assert first.status_code == 200, first.text
        assert "mcp-session-id" not in first.headers
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        for _ in range(6):  # a fresh connection each time: both granian workers take some
            answer = httpx.post(
                f"{mcp_stack.control_url}/mcp", json=listing, headers={**headers, "mcp-protocol-version": "2025-06-18"}
            )
            assert answer.status_code == 200, answer.text
            assert '"list_endpoints"' in answer.text
    async with connected(mcp_stack, account.key) as t:
        for _ in range(10):
            await t.ok("list_endpoints")


async def test_post_only(mcp_stack: Stack, account: Account) -> None:
    """Stateless: no session to end (DELETE), no standalone stream to hold open (GET)."""
    url = f"{mcp_stack.control_url}/mcp"
    sse = {"accept": "text/event-stream"}
    for method in ("GET", "DELETE", "PUT"):
        resp = httpx.request(method, url, headers={**account.headers, **sse}, timeout=10)
        assert_error(resp, 405, "method_not_allowed")
        assert resp.headers["allow"] == "OPTIONS, POST"
    assert_error(httpx.get(url, headers=sse, timeout=10), 401, "unauthorized")
    options = httpx.options(url, timeout=10)
    assert (options.status_code, options.headers["allow"]) == (204, "OPTIONS, POST")


async def test_served_under_any_host_and_origin(mcp_stack: Stack, account: Account) -> None:
    """DNS-rebinding protection is off (control.mcp.mount): the Bearer key is the protection, and a public
    instance is reached under its own host name, through proxies, from browser-based clients."""
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        **account.headers,
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
        "host": "hooks.example.com",
        "origin": "https://agent.example.org",
    }
    answer = httpx.post(f"{mcp_stack.control_url}/mcp", json=listing, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text


def test_module_runs_against_real_processes(mcp_stack: Stack) -> None:
    assert set(mcp_stack.procs) == {"control", "edge", "worker"}
    assert all(proc.poll() is None for proc in mcp_stack.procs.values())
    assert Path(mcp_stack.log_dir).is_dir()
