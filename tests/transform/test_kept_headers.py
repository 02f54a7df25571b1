"""What a delivery's transform is handed and what comes of it, as the worker's cheaper bookkeeping of it must
keep them: headers returned as handed in go out as captured, byte for byte (a null of the transform's own is
still refused, a header named ``__proto__`` is a header like any other); the context's ``received_at``, handed
over as a datetime (``control.delivery.transforms._context``), reads as ``event_context`` writes it; and what
the run did is stored with its text made storable (``control.delivery.send._storable_record``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from control.db.context import Context
from control.transform.apply import Call, Outgoing, Result, apply, event_context, request_input, result_of
from control.transform.pool import Pool
from control.transform.wire import Input, Problem, Run, Sent
from tests.destination import Destination, fetch_row, make_task, running, settled
from tests.helpers import (
    create_endpoint,
    fast_delivery_settings,  # noqa: F401 - the fixture settings, with FAST_DELIVERY
)

URL = "https://example.com/h"
CAPTURED = {
    "content-type": "application/json",
    "x-raw": b"caf\xe9".decode("utf-8", "surrogateescape"),  # captured bytes that are not UTF-8
    "x-kept": "as captured",
}


@pytest.fixture
async def call() -> AsyncIterator[Callable[[str], Call]]:
    pool = Pool(size=1, per_account=1)

    def of(source: str) -> Call:
        async def run(item: Input) -> Run | Problem:
            return await pool.run(source, item, account="acct_a", key="k")

        return run

    try:
        yield of
    finally:
        await pool.close()


async def _apply(call: Call, headers: dict[str, str] = CAPTURED, context: object = None) -> Result:
    return await apply(call, Outgoing("POST", URL, dict(headers), b'{"a": 1}'), context or {})


async def test_headers_returned_as_handed_in_go_out_as_captured_beside_a_new_one(call) -> None:
    result = await _apply(call("function handler(r) { r.headers['x-new'] = '1'; return r; }"))
    assert result.request is not None, result.record
    assert result.request.headers == {**CAPTURED, "x-new": "1"}
    assert result.request.headers["x-raw"] == CAPTURED["x-raw"]  # the captured bytes, not U+FFFD
    assert list(result.request.headers) == [*CAPTURED, "x-new"]  # in the order returned


async def test_a_changed_value_and_a_header_under_another_case_are_checked_as_before(call) -> None:
    source = """function handler(r) {
      const h = r.headers;
      return { headers: { "X-Kept": h["x-kept"], "content-type": "text/plain", "x-raw": h["x-raw"] } };
    }"""
    result = await _apply(call(source))
    assert result.request is not None, result.record
    # Unchanged under another case: the captured value, under the lowercase name; the raw one was shown as
    # U+FFFD and came back so: unchanged, so the captured bytes.
    assert result.request.headers == {
        "x-kept": "as captured",
        "content-type": "text/plain",
        "x-raw": CAPTURED["x-raw"],
    }


async def test_a_null_header_of_the_transforms_own_is_refused_even_beside_kept_ones(call) -> None:
    result = await _apply(call("function handler(r) { r.headers['x-kept'] = null; return r; }"))
    assert result.request is None
    assert result.record.error is not None
    assert result.record.error.message == (
        "the returned request cannot be sent: headers.x-kept: must be a string, not NoneType"
    )


async def test_a_header_named_proto_is_kept_added_or_changed_like_any_other(call) -> None:
    captured = {**CAPTURED, "__proto__": "captured"}
    kept = await _apply(call("function handler(r) { r.headers['x-new'] = '1'; return r; }"), captured)
    assert kept.request is not None, kept.record
    assert kept.request.headers == {**captured, "x-new": "1"}
    changed = await _apply(call("function handler(r) { r.headers['__proto__'] = 'mine'; return r; }"), captured)
    assert changed.request is not None, changed.record
    assert changed.request.headers["__proto__"] == "mine"


async def test_a_datetime_in_the_context_reads_as_event_context_writes_it(call) -> None:
    source = "function handler(r, c) { r.headers['x-at'] = c.event.received_at; return r; }"
    for at in (datetime(2026, 12, 3, 1, 2, 3, tzinfo=UTC), datetime(2026, 12, 3, 1, 2, 3, 4500, tzinfo=UTC)):
        row = {"id": "evt_1", "provider": None, "event_type": None, "received_at": at, "labels": None}
        result = await _apply(call(source), context={"event": {"received_at": at}})
        assert result.request is not None, result.record
        assert result.request.headers["x-at"] == event_context(row, None)["event"]["received_at"]


STAMPED = """function handler(request, context) {
  console.log("a NUL \\0 in a log line");
  request.headers["x-at"] = context.event.received_at;
  return request;
}"""


async def test_a_delivery_gets_its_events_time_and_its_record_is_stored_as_text(
    ctx: Context, client, account, destination: Destination
) -> None:
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": destination.url, "transform": STAMPED},
        headers=account.headers,
    )
    assert resp.status_code == 201, resp.text
    task = await make_task(ctx, destination.url, endpoint_id=endpoint, destination_id=resp.json()["id"])
    async with running(ctx):
        (got,) = await destination.wait_for(1)
        await settled(ctx, task["task"], "succeeded")
    event = await fetch_row(ctx, "SELECT id, received_at FROM events WHERE id = $1", task["event"])
    row = {"id": event["id"], "provider": None, "event_type": None, "received_at": event["received_at"], "labels": None}
    assert got.headers["x-at"] == event_context(row, None)["event"]["received_at"]
    stored = await fetch_row(ctx, "SELECT transform FROM deliveries WHERE task_id = $1", task["task"])
    assert stored["transform"]["logs"] == ["a NUL \ufffd in a log line"]  # jsonb holds no NUL
    assert stored["transform"]["outcome"] == "applied"
    assert stored["transform"]["error"] is None


async def _sent(source: str, headers: dict[str, str] = CAPTURED) -> tuple[Sent, Result]:
    """What crosses back from the sandbox process for ``source`` (the ``Sent``), and the request made of it."""
    pool = Pool(size=1, per_account=1)
    captured = Outgoing("POST", URL, dict(headers), b'{"a": 1}')
    try:
        run = await pool.run(source, request_input(captured, {}), account="acct_a", key="k")
    finally:
        await pool.close()
    assert isinstance(run, Run)
    assert isinstance(run.request, Sent), run
    return run.request, result_of(run, captured)


async def test_headers_kept_in_their_order_cross_back_as_what_changed_or_was_added_alone() -> None:
    source = "function handler(r) { r.headers['x-kept'] = 'mine'; r.headers['x-new'] = '1'; return r; }"
    sent, result = await _sent(source)
    assert sent.kept
    assert sent.headers == {"x-kept": "mine", "x-new": "1"}
    assert result.request is not None
    assert list(result.request.headers.items()) == [
        ("content-type", "application/json"),
        ("x-raw", CAPTURED["x-raw"]),  # the captured bytes
        ("x-kept", "mine"),  # changed in its place
        ("x-new", "1"),
    ]


@pytest.mark.parametrize(
    ("source", "order"),
    [
        (  # one taken out
            "function handler(r) { delete r.headers['x-raw']; return r; }",
            ["content-type", "x-kept"],
        ),
        (  # the same headers in another order
            "function handler(r) { const h = r.headers;"
            " r.headers = { 'x-kept': h['x-kept'], 'content-type': h['content-type'], 'x-raw': h['x-raw'] };"
            " return r; }",
            ["x-kept", "content-type", "x-raw"],
        ),
        (  # a new one ahead of the captured ones
            "function handler(r) { r.headers = { 'x-first': '0', ...r.headers }; return r; }",
            ["x-first", "content-type", "x-raw", "x-kept"],
        ),
    ],
)
async def test_headers_not_kept_in_their_order_cross_back_whole_and_go_out_as_returned(
    source: str, order: list[str]
) -> None:
    sent, result = await _sent(source)
    assert not sent.kept
    assert list(sent.headers) == order
    assert result.request is not None
    assert list(result.request.headers) == order
    assert all(result.request.headers[name] == CAPTURED[name] for name in order if name in CAPTURED)
