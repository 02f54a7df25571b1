"""A request body's bad field reads the same in /v1's answer and in a tool's, in our words: the same message
through the official MCP client over Streamable HTTP as in the 400 of the /v1 request with that body (the rig
of test_mcp.py). `PATCH /v1/endpoints/{id}/auth-config` with a short secret read
`secret: Expected `str` of length >= 16` on both, msgspec's words; now `must be 16 to 1024 characters long`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Account
from tests.e2e import mcp_rig
from tests.e2e.mcp_rig import database_url, module_settings, sink  # noqa: F401 - the rig's fixtures, under their names
from tests.e2e.mcp_support import connected, v1_request
from tests.e2e.test_mcp_messages import LIBRARY_WORDS
from tests.stack import Stack

pytestmark = pytest.mark.slow

mcp_stack = mcp_rig.mcp_stack  # bound by name, as the tests take it (an import would read as redefined)

URL = "https://example.com/hook"
DESTINATION = "dst_01KAAAAAAAAAAAAAAAAAAAAAAA"
EVENT = "evt_01KAAAAAAAAAAAAAAAAAAAAAAA"


def _cases(ep: str) -> list[tuple[str, dict[str, Any], str, str, dict[str, Any], str]]:
    """(tool, its path arguments, method, /v1 path, the body that is also the tool's other arguments, message)."""
    at, destinations, auth = {"endpoint_id": ep}, f"/v1/endpoints/{ep}/destinations", f"/v1/endpoints/{ep}/auth-config"
    rules = f"/v1/endpoints/{ep}/rules"
    rule = {"name": "r", "condition_tree": {"op": "AND", "children": []}}
    return [
        ("create_endpoint", {}, "POST", "/v1/endpoints", {"name": 5}, "name: must be a string, got 5"),
        (
            "create_endpoint",
            {},
            "POST",
            "/v1/endpoints",
            {"name": ["x" * 60]},  # a long value is not echoed
            "name: must be a string, got a JSON array",
        ),
        ("create_endpoint", {}, "POST", "/v1/endpoints", {"name": ""}, "name: must be 1 to 200 characters long, got 0"),
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"secret": "short"},  # its length, never the secret, and what to do about it
            "secret: must be 16 to 1024 characters long, got 5 (a shorter secret is too easy to guess: if the "
            "provider issued this one, or let you set it, rotate it there to one of at least 16 characters and give "
            "that here)",
        ),
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"tolerance_seconds": 0},
            "tolerance_seconds: must be an integer from 1 to 2592000, got 0",
        ),
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"tolerance_seconds": "300"},
            'tolerance_seconds: must be an integer from 1 to 2592000, got "300"',
        ),
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"hmac_enabled": "maybe"},
            'hmac_enabled: must be true or false, got "maybe"',
        ),
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"on_failure": "drop"},
            'on_failure: must be one of accept_log, reject, got "drop"',
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "headers": {"x-a": "b", "x-b": 5}},
            "headers.x-b: must be a string, got 5",
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "rate_limit_per_s": 0},
            "rate_limit_per_s: must be a number from 0.001 to 10000, got 0",
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "ordering": "lifo"},
            'ordering: must be one of fifo, none, got "lifo"',
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "auth": {"type": "kerberos"}},
            'auth.type: must be one of basic, bearer, header, oauth2_client_credentials, mtls, got "kerberos"',
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "auth": {"type": "basic", "username": 5, "password": "p"}},
            "auth.username: must be a string, got 5",
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "name": " "},
            "name: must contain a visible character (not only spaces or control characters)",
        ),
        (
            "create_rule",
            at,
            "POST",
            rules,
            {**rule, "destination_ids": []},
            "destination_ids: must have 1 to 100 items, got 0",
        ),
        (
            "create_rule",
            at,
            "POST",
            rules,
            {**rule, "destination_ids": [DESTINATION, 5]},
            "destination_ids[1]: must be a string, got 5",
        ),
        # not here: a null optional field (a tool takes it as not given) and an unknown field (a tool lists its
        # arguments), where MCP says more than /v1 (ADR 0092; tests/control/test_mcp_agent_frictions.py)
        # a secret in the wrong shape is still a secret: its kind and length, never its value
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"secret": ["whsec_real_secret_value_1"]},
            "secret: must be a string or null, got an array of 1 item",
        ),
        (
            "update_auth_config",
            at,
            "PATCH",
            auth,
            {"verify_token": 12345},
            "verify_token: must be a string or null, got a number",
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "auth": {"type": "bearer", "token": {"t": "tok_live_SECRET"}}},
            "auth.token: must be a string, got an object",
        ),
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "auth": {"type": "basic", "username": "u", "password": ["pw_SECRET"]}},
            "auth.password: must be a string, got an array of 1 item",
        ),
        (
            "replay_event",
            {"event_id": EVENT},
            "POST",
            f"/v1/events/{EVENT}/replay",
            {"url": URL, "resign_with": ["whsec_SECRET"]},
            "resign_with: must be a string or null, got an array of 1 item",
        ),
        (  # a Literal | None says null is taken too
            "rotate_destination_secret",
            {"destination_id": DESTINATION},
            "POST",
            f"/v1/destinations/{DESTINATION}/rotate-secret",
            {"signing_scheme": "rsa"},
            'signing_scheme: must be one of ed25519, hmac, or null, got "rsa"',
        ),
        # a record that holds a secret (a destination's auth) given as another kind is the secret
        (
            "create_destination",
            at,
            "POST",
            destinations,
            {"url": URL, "auth": "Bearer tok_SECRET_xyz"},
            "auth: must be an object or null, got a string of 21 characters",
        ),
        (
            "update_destination",
            {"destination_id": DESTINATION},
            "PATCH",
            f"/v1/destinations/{DESTINATION}",
            {"auth": ["Bearer tok_SECRET_xyz"]},
            "auth: must be an object or null, got an array of 1 item",
        ),
    ]


async def test_a_bad_body_field_reads_the_same_on_v1_and_mcp(mcp_stack: Stack, account: Account) -> None:
    ep = v1_request(mcp_stack, account, "POST", "/v1/endpoints", json={"name": "bodies"}).json()["id"]
    async with connected(mcp_stack, account.key) as t:
        for tool, at, method, path, body, message in _cases(ep):
            http = v1_request(mcp_stack, account, method, path, json=body)
            assert http.status_code == 400, (path, body, http.text)
            assert http.json()["error"] == {"code": "validation_error", "message": message}, (path, body)
            assert await t.error(tool, **at, **body) == http.json()["error"], (tool, body)
            assert not any(words in message for words in LIBRARY_WORDS)
            assert "SECRET" not in message
            assert "whsec_real" not in message
