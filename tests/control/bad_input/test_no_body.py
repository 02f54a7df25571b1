"""A body sent to a /v1 operation that takes none is a 400 naming ``body`` (and the query string its options
go in), for every such operation of the OpenAPI document. A fresh-clone trial found
``POST .../deliveries/retry`` with ``{"since": ..., "destination_id": ...}`` answered 202 retrying every
failed delivery (its filters are query parameters, the body was dropped unread), ``not json at all`` to
``enable`` answered 200, and ``enable`` took ``{"bogus": 1}`` where ``disable`` refused it."""

from __future__ import annotations

from typing import Any

from tests.control.bad_input.walk import _operations, _url
from tests.helpers import assert_error

NO_BODY = "body: this operation takes no body"


async def test_every_operation_without_a_body_refuses_one(client, account, document, made, subtests):
    checked = 0
    for operation_id, method, path, operation in _operations(document):
        if "requestBody" in operation or not path.startswith("/v1/"):
            continue
        query = sorted(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")
        expected = f"{NO_BODY}; its parameters go in the query string ({', '.join(query)})" if query else NO_BODY
        for body in (b'{"surplus": 1}', b"not json at all"):
            with subtests.test(operation=operation_id, body=body):
                headers = {**account.headers, "content-type": "application/json"}
                resp = await client.request(method, _url(path, made), content=body, headers=headers)
                err = assert_error(resp, 400, "validation_error", field="body")
                assert err["message"] == expected
                checked += 1
    assert checked > 60, checked  # the reads and the operations that act without a body


async def test_a_bulk_retrys_filters_in_a_body_start_nothing(client, account, made):
    """The filters are query parameters: in a body they would have been dropped, retrying everything."""
    base = f"/v1/endpoints/{made['endpoint_id']}"
    before = await client.get(f"{base}/deliveries?success=false", headers=account.headers)
    body = b'{"since": "x", "destination_id": "dst_x", "totally": "ignored"}'
    resp = await client.post(f"{base}/deliveries/retry", content=body, headers=account.headers)
    err = assert_error(resp, 400, "validation_error", field="body")
    assert err["message"] == (
        f"{NO_BODY}; its parameters go in the query string "
        "(destination_id, method, provider, q, signature_valid, since, success, type, until)"
    )
    after = await client.get(f"{base}/deliveries?success=false", headers=account.headers)
    assert after.json() == before.json()  # no attempt was queued


async def test_an_empty_body_or_whitespace_is_no_body(client, account, made):
    destination = f"/v1/destinations/{made['destination_id']}/enable"
    for body in (b"", b"\n", b"  \r\n"):
        resp: Any = await client.post(destination, content=body, headers=account.headers)
        assert resp.status_code == 200, (body, resp.text)
