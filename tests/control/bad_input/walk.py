"""The walk over the OpenAPI document that the bad-input tests share: a valid body of every operation, the
operations, their URLs with real ids, and sending one request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.destination_auth.support import Pki

Path = tuple[str | int, ...]
TREE = {"op": "AND", "children": [{"field": "header.x-a", "operator": "equals", "value": "v"}]}
ECHO = "function handler(request) { return request; }"
CA_PEM = Pki().pem
"""A CA certificate for ``tls_ca``: its PEM text gets a NUL or a lone surrogate too."""
"""A transform: a sampled body's every string gets a NUL or a lone surrogate, the source included."""
NUL_IS_CONTENT = {("ReplayEvent", "body"), ("ReplayEvent", "resign_with"), ("RecordForward", "response_body")}
"""Strings that are never stored as text: a replay ``body`` and a forward's ``response_body`` are recorded as
bytes, and ``resign_with`` is only the HMAC key. NUL is valid there (a lone surrogate, which has no UTF-8
bytes, is not)."""


def _bodies(made: dict[str, str]) -> dict[str, dict[str, Any]]:
    """A valid body of every operation that takes one, with every documented field present."""
    return {
        "CreateEndpoint": {"name": "n", "environment": "staging", "external_ref": "ref-1", "temporary": False},
        "UpdateEndpoint": {
            "name": "n",
            "environment": "staging",
            "external_ref": "ref-2",
            "expect_event_within_s": 3600,
            "signature_failure_alert_threshold": 10,
            "body_retention_days": 7,
            "response": {"status": 202, "content_type": "text/plain", "body": "accepted"},
        },
        "CreateAlertDestination": {
            "url": "https://example.com/alerts",
            "name": "n",
            "events": ["destination.circuit_opened"],
            "format": "slack",
        },
        "UpdateAlertDestination": {
            "url": "https://example.com/other-alerts",
            "name": "n",
            "events": ["delivery.exhausted"],
            "format": "json",
        },
        "CreateDestination": {
            "url": "https://example.com/hook",
            "name": "n",
            "headers": {"x-a": "b"},
            "forward_all": False,
            "condition_tree": TREE,
            "rule_name": "r",
            "sign_deliveries": True,
            "propagate_trace": True,
            "rate_limit_per_s": 10,
            "ordering": "fifo",
            "ordering_key": "body.data.customer",
            "deduplicate_window_s": 60,
            "transform": ECHO,
            "auth": {"type": "bearer", "token": "t0ken"},
            "tls_ca": CA_PEM,
            "signing_scheme": "ed25519",
        },
        "UpdateDestination": {
            "url": "https://example.com/other",
            "name": "n",
            "headers": {"x-a": "b"},
            "sign_deliveries": False,
            "propagate_trace": False,
            "rate_limit_per_s": 10,
            "ordering": "fifo",
            "ordering_key": "body.data.customer",
            "deduplicate_window_s": 60,
            "transform": ECHO,
            "auth": {"type": "header", "name": "x-key", "value": "v4lue"},
            "tls_ca": CA_PEM,
        },
        "RotateDestinationSecret": {"overlap_s": 60, "signing_scheme": "hmac"},
        "DisableDestination": {"reason": "r"},
        "SendTestWebhook": {"provider": "payments", "event_type": "invoice.paid", "headers": "neutral"},
        "CreateRule": {
            "name": "n",
            "condition_tree": TREE,
            "destination_ids": [made["destination_id"]],
            "active": True,
        },
        "UpdateRule": {
            "name": "n",
            "condition_tree": TREE,
            "destination_ids": [made["destination_id"]],
            "active": True,
        },
        "UpdateAuthConfig": {
            "hmac_enabled": True,
            "secret": "whsec_a-provider-secret",
            "header_name": "x-signature",
            "tolerance_seconds": 300,
            "on_failure": "reject",
            "log_blocked_ips": False,
            "provider": "slack",
            "verify_token": "a-verify-token",
        },
        "AddAllowlistEntry": {"cidr": "198.51.100.0/24"},
        "EraseEvents": {"field": "body.data.customer", "value": "cus_1"},
        "CreateLabelRule": {"source": "body", "path": "data.customer", "output_key": "customer", "color": "#123456"},
        "UpdateLabelRule": {"source": "body", "path": "data.id", "output_key": "k2", "color": "#654321"},
        "StartTemporaryEndpoint": {"ref": "r", "provider_hint": "payments"},
        "Register": {"email": "someone@example.com", "api_token": made["api_token"]},
        "ReplayEvent": {
            "url": made["replay_url"],  # refused at once: the outcome is a 200 all the same
            "destination_id": made["replay_destination_id"],
            "preserve_headers": True,
            "headers": {"x-a": "b"},
            "body": "b",
            "resign_with": "whsec_a-receiver-secret",
            "signature_header": "x-signature",
            "transform": ECHO,
        },
        "RecordForward": {
            "url": "http://localhost:3000/webhooks",
            "status": 401,
            "latency_ms": 4,
            "error": "the app said no",
            "sent_headers": {"x-a": "b"},
            "response_body": "signature mismatch",
        },
        "TestTransformation": {
            "transform": ECHO,
            "event_id": made["event_id"],
            "destination_id": made["destination_id"],
            "request": {"method": "POST", "path": "/p", "query": "a=1", "headers": {"x-a": "b"}, "body": "b"},
        },
    }


def body_ref(operation: dict[str, Any]) -> str:
    """The component name of an operation's JSON body (an optional body is one of it and null)."""
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    ref = schema.get("$ref") or next(o["$ref"] for o in schema.get("oneOf", schema.get("anyOf", [])) if "$ref" in o)
    return ref.rsplit("/", 1)[1]


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield operation["operationId"], method.upper(), path, operation


def _url(path: str, made: dict[str, str], **override: str) -> str:
    values = {**made, **override}
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, path
    return path


def _strings(value: Any, path: Path = ()) -> Iterator[tuple[Path, bool]]:
    """(path, is_key) of every string in a JSON value: values, and the keys of free-form objects (headers)."""
    if isinstance(value, str):
        yield path, False
    elif isinstance(value, dict):
        for key, item in value.items():
            if path and path[-1] == "headers":
                yield (*path, key), True
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


def _dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _spoiled(body: Any, path: Path, is_key: bool, bad: str) -> Any:
    """A deep copy of ``body`` with ``bad`` appended to the string at ``path`` (to the key, with ``is_key``)."""
    body = json.loads(json.dumps(body))
    parent = body
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if is_key:
        parent[last + bad] = parent.pop(last)
    else:
        parent[last] = parent[last] + bad
    return body


def _expected_field(path: Path, is_key: bool) -> str:
    """What the message must start with: the field, or for a key its object (``headers``)."""
    return _dotted(path[:-1] if is_key else path)


async def _send(client, account, method: str, url: str, body: Any) -> Any:
    raw = json.dumps(body).encode()  # ensure_ascii: a lone surrogate goes out as its \\ud800 escape
    headers = {**account.headers, "content-type": "application/json"}
    return await client.request(method, url, content=raw, headers=headers)


def _assert_refused(resp: Any, field: str) -> None:
    assert resp.status_code == 400, f"{field}: {resp.status_code} {resp.text}"
    err = resp.json()["error"]
    assert err["code"] in ("validation_error", "invalid_condition_tree"), err
    assert err["message"].startswith(field), (field, err["message"])
