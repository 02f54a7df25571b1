"""Every example message of docs/reference/errors.md is one a request really gets: each is sent here (or, for
a tool's argument, found among the messages tests/e2e/test_mcp_messages.py checks over the official MCP
client). A fresh-clone trial found the page's `at: must be an RFC 3339 date-time, got "x"`, a parameter no
operation has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.helpers import assert_error

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = re.compile(r"`([a-z_][\w.\[\]-]*: (?:must|unknown|this operation)[^`]*)`")
TREE = {"op": "AND", "children": []}


def _examples() -> set[str]:
    return set(MESSAGE.findall((ROOT / "docs/reference/errors.md").read_text().replace("\n", " ")))


def _requests(ep: str, dst: str) -> dict[str, tuple[str, str, Any]]:
    """Example message (its part before ``...``) -> (method, path, body sent as it is)."""
    auth, dests = f"/v1/endpoints/{ep}/auth-config", f"/v1/endpoints/{ep}/destinations"
    url = "https://example.com/hook"
    leaf = '{"url":"https://example.com/hook","condition_tree":{"field":5,"operator":"exists"}}'
    return {
        (
            'condition_tree.children[1].operator: unknown operator "gt"; '
            "one of equals, not_equals, contains, exists, regex"
        ): (
            "POST",
            dests,
            '{"url":"https://example.com/hook","condition_tree":{"op":"AND","children":['
            '{"field":"body.a","operator":"exists"},{"field":"body.a","operator":"gt","value":1}]}}',
        ),
        "name: must be a string, got 5": ("POST", "/v1/endpoints", {"name": 5}),
        'hmac_enabled: must be true or false, got "maybe"': ("PATCH", auth, {"hmac_enabled": "maybe"}),
        "tolerance_seconds: must be an integer from 1 to 2592000, got 0": ("PATCH", auth, {"tolerance_seconds": 0}),
        'ordering: must be one of fifo, none, got "lifo"': ("POST", dests, {"url": url, "ordering": "lifo"}),
        "auth.type: must be one of basic, bearer, ": ("POST", dests, {"url": url, "auth": {"type": "kerberos"}}),
        'signing_scheme: must be one of ed25519, hmac, or null, got "rsa"': (
            "POST",
            f"/v1/destinations/{dst}/rotate-secret",
            {"signing_scheme": "rsa"},
        ),
        "headers.x-b: must be a string, got 5": ("POST", dests, {"url": url, "headers": {"x-a": "b", "x-b": 5}}),
        "auth: must be an object or null, got a string of 21 characters": (
            "POST",
            dests,
            {"url": url, "auth": "Bearer tok_SECRET_xyz"},
        ),
        "destination_ids[1]: must be a string, got 5": (
            "POST",
            f"/v1/endpoints/{ep}/rules",
            {"name": "r", "condition_tree": TREE, "destination_ids": [dst, 5]},
        ),
        "condition_tree.field: must be a string, got 5": ("POST", dests, leaf),
        (
            "secret: must be 16 to 1024 characters long, got 15 (a shorter secret is too easy to guess: if the "
            "provider issued this one, or let you set it, rotate it there to one of at least 16 characters "
        ): ("PATCH", auth, {"secret": "x" * 15}),
        "name: must be 1 to 200 characters long, got 0": ("POST", "/v1/endpoints", {"name": ""}),
        "name: must be a string, got a JSON array": ("POST", "/v1/endpoints", {"name": ["x" * 60]}),
        "body: must be an object, got []": ("POST", "/v1/endpoints", []),
        "output_key: must be 1 to 64 letters, digits, _ or -": (
            "POST",
            f"/v1/endpoints/{ep}/labels",
            {"path": "a", "output_key": "a b"},
        ),
        "color: must be a colour as # and six hex digits (#1f6feb)": (
            "POST",
            f"/v1/endpoints/{ep}/labels",
            {"path": "a", "output_key": "k", "color": "red"},
        ),
        "rate_limit_per_s: must be a number from 0.001 to 10000, got a number too large to represent": (
            "POST",
            dests,
            '{"url":"https://example.com/hook","rate_limit_per_s":1e999}',
        ),
        "secret: must be a string or null, got an array of 1 item": ("PATCH", auth, {"secret": ["whsec_x"]}),
        "body: this operation takes no body; its parameters go in the query string (destination_id, method, "
        "provider, q, signature_valid, since, success, type, until)": (
            "POST",
            f"/v1/endpoints/{ep}/deliveries/retry",
            '{"since": "x"}',
        ),
        "body: this operation takes no body": ("POST", f"/v1/destinations/{dst}/enable", '{"bogus": 1}'),
        "limit: must be an integer from 1 to 100 (page size), got -1": (
            "GET",
            f"/v1/endpoints/{ep}/deliveries?limit=-1",
            None,
        ),
    }


async def test_every_example_message_is_one_a_request_gets(client, account, subtests):
    h = account.headers
    ep = (await client.post("/v1/endpoints", json={"name": "doc"}, headers=h)).json()["id"]
    dst = await client.post(f"/v1/endpoints/{ep}/destinations", json={"url": "https://example.com/"}, headers=h)
    requests = _requests(ep, dst.json()["id"])
    mcp = "".join(
        (ROOT / f).read_text() for f in ("tests/e2e/test_mcp_messages.py", "tests/control/test_mcp_agent_frictions.py")
    )
    examples = _examples()
    assert len(examples) >= 20, examples
    for example in sorted(examples):
        with subtests.test(example=example):
            known = example.split("...")[0]
            if known not in requests:  # a tool's argument, which /v1 reads from text: checked over MCP
                assert f'"{example}"' in mcp or f"'{example}'" in mcp, example
                continue
            method, path, body = requests[known]
            sent: dict[str, Any] = {"content": body} if isinstance(body, str) else {"json": body}
            resp = await client.request(method, path, headers=h, **({} if body is None else sent))
            message = assert_error(resp, 400, resp.json()["error"]["code"])["message"]
            assert message.startswith(known) if known != example else message == example, message
