"""Bad input on the control plane is a 4xx envelope naming what is wrong, never a 500 (issue 13).

Field by field, from the OpenAPI document itself so a new field cannot be missed: NUL (Postgres text and
jsonb hold none) and lone surrogates (no UTF-8 form) in every string of every request body and query;
ids with NUL in every path; since/until whose UTC instant leaves the calendar; unknown fields; JSON types
the document does not allow (strict decoding). Then the same through the service functions, which the MCP
tools call with values Python's ``json`` decoded (lone surrogates included). The document's own strictness
is checked too: what it states is what the server does (tests/e2e/test_schemathesis.py checks that broadly).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.control.bad_input.walk import (
    NUL_IS_CONTENT,
    _assert_refused,
    _bodies,
    _dotted,
    _expected_field,
    _operations,
    _send,
    _spoiled,
    _strings,
    _url,
    body_ref,
)
from tests.helpers import assert_error


async def test_every_request_body_field_is_sampled(document, made):
    """The body table below covers every documented field: a new field must join the NUL tests."""
    bodies = _bodies(made)
    for operation_id, _method, _path, operation in _operations(document):
        if "requestBody" not in operation:
            continue
        schema = document["components"]["schemas"][body_ref(operation)]
        assert operation_id in bodies, f"{operation_id} takes a body the tests do not sample"
        assert set(schema["properties"]) == set(bodies[operation_id]), operation_id


@pytest.mark.parametrize(("bad", "what"), [("\x00", "NUL"), ("\ud800", "lone surrogate")])
async def test_nul_and_lone_surrogates_in_any_body_string_are_a_400_naming_it(
    client, account, document, made, subtests, bad, what
):
    """Except NUL where it is content (``NUL_IS_CONTENT``), which is accepted."""
    bodies = _bodies(made)
    for operation_id, method, path, _operation in _operations(document):
        if operation_id not in bodies:
            continue
        url = _url(path, made)
        for string_path, is_key in _strings(bodies[operation_id]):
            field = _expected_field(string_path, is_key)
            with subtests.test(operation=operation_id, field=_dotted(string_path), key=is_key):
                resp = await _send(
                    client, account, method, url, _spoiled(bodies[operation_id], string_path, is_key, bad)
                )
                if what == "NUL" and (operation_id, field) in NUL_IS_CONTENT:
                    assert resp.status_code in (200, 201), resp.text  # 201: a recorded forward
                    continue
                _assert_refused(resp, field)
                if what == "lone surrogate":
                    assert "surrogate" in resp.json()["error"]["message"]


async def test_the_sampled_bodies_themselves_are_accepted(client, account, document, made, subtests):
    """So the refusals above are about the NUL or surrogate, nothing else."""
    bodies = _bodies(made)
    for operation_id, method, path, _operation in _operations(document):
        if operation_id in bodies:
            with subtests.test(operation=operation_id):
                resp = await _send(client, account, method, _url(path, made), bodies[operation_id])
                assert resp.status_code in (200, 201, 202), resp.text  # 202: an erasure job


def _query_strings(operation: dict[str, Any]) -> Iterator[str]:
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "query" and parameter["name"] not in ("limit", "timeout"):
            yield parameter["name"]


async def test_nul_in_any_query_parameter_is_a_400_naming_it(client, account, document, made, subtests):
    checked = set()
    for operation_id, method, path, operation in _operations(document):
        if method != "GET" and "requestBody" in operation:
            continue
        for name in _query_strings(operation):
            checked.add((method, name))
            with subtests.test(operation=operation_id, parameter=name):
                params = {name: "a\x00"} | ({"timeout": 1} if path.endswith("/wait") else {})
                resp = await client.request(method, _url(path, made), params=params, headers=account.headers)
                assert_error(resp, 400, "validation_error", field=name)
    names = {"external_ref", "since", "until", "type", "method", "q", "cursor", "provider"}
    assert {("GET", name) for name in names} <= checked
    assert {("POST", name) for name in ("q", "destination_id")} <= checked  # a bulk retry's filters


async def test_a_query_parameter_the_operation_does_not_take_is_a_400_naming_it(
    client, account, document, made, subtests
):
    """A typo of a filter (or another operation's filter) answered 200 with everything, unfiltered."""
    checked = 0
    for operation_id, method, path, operation in _operations(document):
        if method != "GET" or not path.startswith("/v1/"):  # pages (the inbox) take what a browser adds
            continue
        with subtests.test(operation=operation_id):
            resp = await client.request(method, _url(path, made), params={"sucess": "false"}, headers=account.headers)
            err = assert_error(resp, 400, "validation_error", field="sucess")
            taken = sorted(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")
            assert err["message"].endswith(f"(this operation takes: {', '.join(taken) or 'none'})"), err
            checked += 1
    assert checked > 20
    twice = await client.get(
        f"/v1/endpoints/{made['endpoint_id']}/deliveries",
        params=[("success", "true"), ("limit", "5"), ("success", "false")],
        headers=account.headers,
    )
    err = assert_error(twice, 400, "validation_error", field="success")
    assert "more than once" in err["message"]
    anonymous = await client.get(f"/v1/endpoints/{made['endpoint_id']}/deliveries", params={"sucess": "false"})
    assert_error(anonymous, 401, "unauthorized")  # nothing about the operation before the caller is known


async def test_nul_in_any_path_id_is_a_404_not_a_500(client, account, document, made, subtests):
    bodies = _bodies(made)
    for operation_id, method, path, _operation in _operations(document):
        for name in [n for n in made if "{" + n + "}" in path]:
            for bad in ("%00", "ep_%00", made[name] + "%00"):
                with subtests.test(operation=operation_id, parameter=name, value=bad):
                    url = _url(path, made, **{name: bad})
                    if operation_id in bodies:
                        resp = await _send(client, account, method, url, bodies[operation_id])
                    else:
                        resp = await client.request(method, url, headers=account.headers)
                    assert_error(resp, 404, "not_found")


async def test_nul_external_ref_filter_is_a_400(client, account):
    """The reported case: GET /v1/endpoints?external_ref=a%00b answered 500."""
    resp = await client.get("/v1/endpoints", params={"external_ref": "a\x00b"}, headers=account.headers)
    err = assert_error(resp, 400, "validation_error", field="external_ref")
    assert err["message"] == "external_ref: must not contain NUL characters"
