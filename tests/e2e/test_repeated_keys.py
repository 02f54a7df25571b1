"""A key given twice in a body is read last-wins on /v1 as on MCP (whose SDK parses JSON with Python's json),
so the value judged is the value kept and the one a message echoes. A fresh-clone trial found
`{"tolerance_seconds":0,"tolerance_seconds":300}` refused on /v1 with `... got 300` (msgspec judged the first
value, the message echoed the last) while MCP took 300, and `{"hmac_enabled":"yes","hmac_enabled":true}`
refused with `must be true or false, got true`. Raw JSON-RPC here: a client's dict cannot repeat a key."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import Account
from tests.e2e import mcp_rig
from tests.e2e.mcp_rig import database_url, module_settings, sink  # noqa: F401 - the rig's fixtures, under their names
from tests.e2e.mcp_support import v1_request
from tests.stack import Stack

pytestmark = pytest.mark.slow

mcp_stack = mcp_rig.mcp_stack  # bound by name, as the tests take it (an import would read as redefined)


def _tool(stack: Stack, account: Account, arguments: str) -> dict[str, object]:
    """``update_auth_config`` called with ``arguments``, raw JSON text: the tool's answer (its content's JSON)."""
    call = (
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"update_auth_config","arguments":'
        + arguments
        + "}}"
    )
    headers = {
        **account.headers,
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2025-06-18",
    }
    answer = httpx.post(f"{stack.control_url}/mcp", content=call, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    text = answer.text
    if text.startswith("event:") or "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result = json.loads(text)["result"]
    content: dict[str, object] = json.loads(result["content"][0]["text"])
    return content


async def test_a_repeated_key_is_read_last_wins_on_v1_and_mcp(mcp_stack: Stack, account: Account) -> None:
    ep = v1_request(mcp_stack, account, "POST", "/v1/endpoints", json={"name": "repeats"}).json()["id"]
    path = f"/v1/endpoints/{ep}/auth-config"
    for body, field, kept in [
        ('{"tolerance_seconds":0,"tolerance_seconds":300}', "tolerance_seconds", 300),
        ('{"hmac_enabled":"yes","hmac_enabled":false}', "hmac_enabled", False),
        ('{"tolerance_seconds":"x","tolerance_seconds":60.0}', "tolerance_seconds", 60),
    ]:
        http = v1_request(mcp_stack, account, "PATCH", path, content=body)
        assert http.status_code == 200, (body, http.text)
        assert http.json()[field] == kept
        tool = _tool(mcp_stack, account, body[:-1] + f',"endpoint_id":"{ep}"}}')
        assert tool[field] == kept, tool
    for body, message in [
        (
            '{"tolerance_seconds":300,"tolerance_seconds":0}',
            "tolerance_seconds: must be an integer from 1 to 2592000, got 0",
        ),
        ('{"hmac_enabled":true,"hmac_enabled":1}', "hmac_enabled: must be true or false, got 1"),
        (
            '{"on_failure":"drop","on_failure":"nope"}',
            'on_failure: must be one of accept_log, reject, got "nope"',
        ),
    ]:
        http = v1_request(mcp_stack, account, "PATCH", path, content=body)
        assert http.status_code == 400, (body, http.text)
        assert http.json()["error"] == {"code": "validation_error", "message": message}
        tool = _tool(mcp_stack, account, body[:-1] + f',"endpoint_id":"{ep}"}}')
        assert tool.get("error") == http.json()["error"], tool
