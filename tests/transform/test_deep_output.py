"""A transform that returns a request nesting past the JSON depth cap (20,000 levels, as the body or a
header) fails with the limit named: in the dry run and in a delivery, never a 500 nor an ended sandbox
process (its answer was decoded recursively in the sandbox process: ``RecursionError``, "exit status 1").
A string body holding such JSON is text, and is sent as it is."""

from __future__ import annotations

import pytest

from control.db.context import Context
from control.transform.apply import Outgoing, apply
from control.transform.pool import Pool
from control.transform.wire import Input, Problem, Run
from shared.json_depth import MAX_DEPTH
from tests.destination import Destination, fetch_row, make_task, running, settled
from tests.helpers import (
    create_endpoint,
    fast_delivery_settings,  # noqa: F401 - the fixture settings, with FAST_DELIVERY
)

DEEP = "let o = {}; for (let i = 0; i < 20000; i++) o = { a: o };"
AS_BODY = f"function handler(r) {{ {DEEP} r.body = o; return r; }}"
AS_HEADER = f"function handler(r) {{ {DEEP} r.headers = {{ x: o }}; return r; }}"
AS_TEXT = f"function handler(r) {{ {DEEP} r.body = JSON.stringify(o); return r; }}"
TOO_DEEP = f"a field of the returned request nests deeper than {MAX_DEPTH} levels (the limit on JSON depth)"


@pytest.mark.parametrize("transform", [AS_BODY, AS_HEADER])
async def test_the_dry_run_names_the_depth_limit(client, account, transform: str) -> None:
    request = {"method": "POST", "path": "/", "headers": {"content-type": "application/json"}, "body": {"a": 1}}
    resp = await client.post(
        "/v1/transformations/test", json={"transform": transform, "request": request}, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    result = resp.json()
    assert result["request"] is None
    assert result["error"] == {"message": TOO_DEEP, "line": None}
    again = await client.post(  # the sandbox process is still there, and serves the next call
        "/v1/transformations/test",
        json={"transform": "function handler(r) { return r; }", "request": request},
        headers=account.headers,
    )
    assert again.json()["error"] is None


async def test_deep_json_as_a_string_body_is_text_and_is_shown(client, account) -> None:
    request = {"method": "POST", "path": "/", "headers": {"content-type": "application/json"}, "body": {"a": 1}}
    resp = await client.post(
        "/v1/transformations/test", json={"transform": AS_TEXT, "request": request}, headers=account.headers
    )
    assert resp.status_code == 200, resp.text
    shown = resp.json()["request"]["body"]
    assert isinstance(shown, str)  # too deep to be shown decoded: shown as the text it is
    assert shown.startswith('{"a":{"a":')


async def test_a_delivery_fails_naming_the_depth_limit(ctx: Context, client, account, destination: Destination) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    made = []
    for transform in (AS_BODY, AS_HEADER):
        resp = await client.post(
            f"/v1/endpoints/{endpoint}/destinations",
            json={"url": destination.url, "transform": transform},
            headers=account.headers,
        )
        assert resp.status_code == 201, resp.text
        made.append(await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=resp.json()["id"]))
    async with running(ctx):
        for task in made:
            failed = await settled(ctx, task["task"], "failed")
            assert failed["last_error"] == f"transform failed: {TOO_DEEP}"
    for task in made:
        row = await fetch_row(ctx, "SELECT transform FROM deliveries WHERE task_id = $1", task["task"])
        assert row["transform"]["outcome"] == "failed"
        assert row["transform"]["error"] == {"message": TOO_DEEP, "line": None}
        assert row["transform"].get("crashed") is None
    assert destination.requests == []


async def test_a_captured_body_at_the_cap_comes_back_as_it_was() -> None:
    """The cap is on each field: a body nesting exactly ``MAX_DEPTH`` levels (a captured webhook a
    transform is given) returned unchanged is sent byte for byte, one level deeper is refused."""
    pool = Pool(size=1, per_account=1)
    try:

        async def call(item: Input) -> Run | Problem:
            return await pool.run("function handler(r) { return r; }", item, account="acct_a", key="k")

        at_cap = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
        sent = Outgoing("POST", "https://example.com/h", {"content-type": "application/json"}, at_cap)
        result = await apply(call, sent, {})
        assert result.record.outcome == "applied", result.record
        assert result.request is not None
        assert result.request.body == at_cap
        over = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
        refused = await apply(call, Outgoing("POST", "https://example.com/h", sent.headers, over), {})
        assert refused.record.outcome == "failed"
        assert refused.record.error is not None
        assert refused.record.error.message.startswith(f"the request body nests deeper than {MAX_DEPTH} levels")
    finally:
        await pool.close()
