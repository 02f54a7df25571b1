"""Bad input on the control plane is a 4xx envelope naming what is wrong, never a 500 (issue 13).

Field by field, from the OpenAPI document itself so a new field cannot be missed: NUL (Postgres text and
jsonb hold none) and lone surrogates (no UTF-8 form) in every string of every request body and query;
ids with NUL in every path; since/until whose UTC instant leaves the calendar; unknown fields; JSON types
the document does not allow (strict decoding). Then the same through the service functions, which the MCP
tools call with values Python's ``json`` decoded (lone surrogates included). The document's own strictness
is checked too: what it states is what the server does (tests/e2e/test_schemathesis.py checks that broadly).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from control.records.destinations import DestinationCreate, DestinationUpdate
from control.records.endpoints import EndpointCreate, EndpointUpdate
from control.records.replay import ReplayRequest
from control.records.rules import RuleCreate
from control.records.trust import AuthConfigUpdate
from control.routing.conditions import InvalidConditionTree
from control.service import Principal
from control.service import destinations as destinations_service
from control.service import endpoints as endpoints_service
from control.service import events as events_service
from control.service import replay as replay_service
from control.service import rules as rules_service
from control.service import trust as trust_service
from control.service.accounts import create_account
from shared.errors import ValidationError
from shared.settings import Settings, load_settings
from tests.events_support import Ev, store, store_delivery
from tests.helpers import assert_error, db
from tests.schemas.conftest import flush, record
from tests.stack import free_port

Path = tuple[str | int, ...]
TREE = {"op": "AND", "children": [{"field": "header.x-a", "operator": "equals", "value": "v"}]}
ECHO = "function handler(request) { return request; }"
"""A transform: a sampled body's every string gets a NUL or a lone surrogate, the source included."""
NUL_IS_CONTENT = {("ReplayEvent", "body"), ("ReplayEvent", "resign_with")}
"""Strings that are never stored as text: a replay ``body`` is sent and recorded as bytes, and ``resign_with``
is only the HMAC key. NUL is valid there (a lone surrogate, which has no UTF-8 bytes, is not)."""


@pytest.fixture
def settings(servers, database_url: str, redis_prefix: str) -> Settings:
    """The suite's settings with room for the few hundred requests a test sends in a second or two."""
    return load_settings(
        {},
        database_url=database_url,
        redis_url=servers.redis_url,
        redis_prefix=redis_prefix,
        egress="any",
        rate_limit_per_s=100_000,
        rate_limit_burst=100_000,
        start_rate_per_min=100_000,
    )


@pytest.fixture
async def made(client, account, database_url, ctx) -> dict[str, str]:
    """One of each object, so every route reaches its validation instead of a 404."""
    h = account.headers
    endpoint = (await client.post("/v1/endpoints", json={"name": "e"}, headers=h)).json()
    base = f"/v1/endpoints/{endpoint['id']}"
    destination = (await client.post(f"{base}/destinations", json={"url": "https://example.com/"}, headers=h)).json()
    rule_body = {"name": "r", "condition_tree": TREE, "destination_ids": [destination["id"]]}
    rule = (await client.post(f"{base}/rules", json=rule_body, headers=h)).json()
    entry = (await client.post(f"{base}/allowlist", json={"cidr": "192.0.2.0/24"}, headers=h)).json()
    label = (await client.post(f"{base}/labels", json={"path": "a.b", "output_key": "k"}, headers=h)).json()
    async with db(database_url) as conn:
        (event_id,) = await store(conn, None, None, [Ev(endpoint["id"])])
        delivery_id = await store_delivery(conn, endpoint["id"], event_id, created_at=datetime.now(UTC), success=False)
    await flush(ctx, [record(endpoint["id"], {"type": "t", "id": "1"})])  # a learned schema
    async with db(database_url) as conn:
        schema_id = await conn.fetchval("SELECT id FROM schemas")
    retry = (await client.post(f"{base}/deliveries/retry", headers=h)).json()
    alerts = (await client.post("/v1/alert-destinations", json={"url": "https://example.com/a"}, headers=h)).json()
    erasure = (await client.post(f"{base}/events/erase", json={"field": "body.a", "value": "v"}, headers=h)).json()
    started = (await client.post("/api/start")).json()
    return {
        "api_token": started["api_token"],
        "endpoint_id": endpoint["id"],
        "destination_id": destination["id"],
        "rule_id": rule["id"],
        "entry_id": entry["id"],
        "label_id": label["id"],
        "schema_id": schema_id,
        "event_id": event_id,
        "delivery_id": delivery_id,
        "retry_id": retry["id"],
        "alert_destination_id": alerts["id"],
        "erasure_id": erasure["id"],
    }


@pytest.fixture
async def document(client) -> dict[str, Any]:
    resp = await client.get("/schema/openapi.json")
    assert resp.status_code == 200
    return resp.json()


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
            "rate_limit_per_s": 10,
            "ordering": "fifo",
            "ordering_key": "body.data.customer",
            "deduplicate_window_s": 60,
            "transform": ECHO,
        },
        "UpdateDestination": {
            "url": "https://example.com/other",
            "name": "n",
            "headers": {"x-a": "b"},
            "sign_deliveries": False,
            "rate_limit_per_s": 10,
            "ordering": "fifo",
            "ordering_key": "body.data.customer",
            "deduplicate_window_s": 60,
            "transform": ECHO,
        },
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
        },
        "AddAllowlistEntry": {"cidr": "198.51.100.0/24"},
        "EraseEvents": {"field": "body.data.customer", "value": "cus_1"},
        "CreateLabelRule": {"source": "body", "path": "data.customer", "output_key": "customer", "color": "#123456"},
        "UpdateLabelRule": {"source": "body", "path": "data.id", "output_key": "k2", "color": "#654321"},
        "StartTemporaryEndpoint": {"ref": "r", "provider_hint": "payments"},
        "Register": {"email": "someone@example.com", "api_token": made["api_token"]},
        "ReplayEvent": {
            "url": f"http://127.0.0.1:{free_port()}/nobody",  # refused at once: the outcome is a 200 all the same
            "preserve_headers": True,
            "headers": {"x-a": "b"},
            "body": "b",
            "resign_with": "whsec_a-receiver-secret",
            "signature_header": "x-signature",
            "transform": ECHO,
        },
        "TestTransformation": {
            "transform": ECHO,
            "event_id": made["event_id"],
            "destination_id": made["destination_id"],
            "request": {"method": "POST", "path": "/p", "query": "a=1", "headers": {"x-a": "b"}, "body": "b"},
        },
    }


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


async def test_every_request_body_field_is_sampled(document, made):
    """The body table below covers every documented field: a new field must join the NUL tests."""
    bodies = _bodies(made)
    for operation_id, _method, _path, operation in _operations(document):
        if "requestBody" not in operation:
            continue
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
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
                    assert resp.status_code == 200, resp.text
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
                params = {name: "a\x00", "timeout": 1}
                resp = await client.request(method, _url(path, made), params=params, headers=account.headers)
                assert_error(resp, 400, "validation_error", field=name)
    names = {"external_ref", "since", "until", "type", "method", "q", "cursor", "provider"}
    assert {("GET", name) for name in names} <= checked
    assert {("POST", name) for name in ("q", "destination_id")} <= checked  # a bulk retry's filters


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


OUT_OF_RANGE = [
    ("since", "9999-12-31T23:59:59-14:00"),  # in UTC: year 10000
    ("until", "9999-12-31T23:59:59-14:00"),
    ("since", "0001-01-01T00:00:00+14:00"),  # in UTC: year 0
    ("until", "0001-01-01T00:00:00+14:00"),
    ("until", "9999-12-31T23:59:59.999999Z"),  # the exclusive bound is a microsecond later
    ("until", "9999-12-31"),  # a whole day: up to the start of year 10000
    ("since", "0001-01-01"),
    ("since", "0001-06-01T00:00:00Z"),  # years 1 and 9999 entirely: the rule the document states
]


@pytest.mark.parametrize("route", ["", "/latest", "/wait"])
@pytest.mark.parametrize(("name", "value"), OUT_OF_RANGE)
async def test_instants_outside_the_calendar_are_a_400_on_list_latest_and_wait(
    client, account, made, route, name, value
):
    resp = await client.get(
        f"/v1/endpoints/{made['endpoint_id']}/events{route}",
        params={name: value, "timeout": 1},
        headers=account.headers,
    )
    err = assert_error(resp, 400, "validation_error", field=name)
    assert "year" in err["message"]


@pytest.mark.parametrize(
    "params",
    [
        {"since": "0002-01-01T00:00:00+23:59", "until": "9998-12-31T23:59:59-23:59"},  # the widest offsets
        {"since": "2026-01-01t00:00:00z"},  # RFC 3339 allows lowercase
        {"until": "2016-12-31T23:59:60Z"},  # a leap second
        {"since": "2026-11-21T10:00:00.123456789+01:00"},  # more fraction digits than a microsecond
    ],
    ids=["range-edges", "lowercase", "leap-second", "nanoseconds"],
)
async def test_rfc3339_instants_at_the_edges_are_accepted(client, account, made, params):
    resp = await client.get(f"/v1/endpoints/{made['endpoint_id']}/events", params=params, headers=account.headers)
    assert resp.status_code == 200, resp.text


async def test_an_empty_since_is_a_400_not_no_filter(client, account, made):
    resp = await client.get(
        f"/v1/endpoints/{made['endpoint_id']}/events", params={"since": ""}, headers=account.headers
    )
    assert_error(resp, 400, "validation_error", field="since")


async def test_unknown_fields_are_400_on_every_body(client, account, document, made, subtests):
    bodies = _bodies(made)
    for operation_id, method, path, operation in _operations(document):
        if "requestBody" not in operation:
            continue
        ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        with subtests.test(operation=operation_id):
            assert document["components"]["schemas"][ref.rsplit("/", 1)[1]]["additionalProperties"] is False
            body = {**bodies[operation_id], "surplus": 1}
            resp = await _send(client, account, method, _url(path, made), body)
            err = assert_error(resp, 400, "validation_error", field="surplus")
            assert err["message"] == "surplus: unknown field"


STRICT = [
    ("UpdateAuthConfig", {"hmac_enabled": "true"}, "hmac_enabled", "Expected `bool`, got `str`"),
    ("UpdateAuthConfig", {"log_blocked_ips": 0}, "log_blocked_ips", "Expected `bool`, got `int`"),
    ("UpdateAuthConfig", {"tolerance_seconds": "300"}, "tolerance_seconds", "Expected `int`, got `str`"),
    ("UpdateAuthConfig", {"tolerance_seconds": 1.5}, "tolerance_seconds", "Expected `int`, got `float`"),
    ("UpdateRule", {"active": 1}, "active", "Expected `bool`, got `int`"),
    ("CreateDestination", {"url": "https://example.com/", "forward_all": "false"}, "forward_all", "`bool`"),
]


@pytest.mark.parametrize(("operation_id", "body", "field", "words"), STRICT)
async def test_bodies_are_decoded_strictly_as_documented(
    client, account, document, made, operation_id, body, field, words
):
    method, path = next((m, p) for o, m, p, _ in _operations(document) if o == operation_id)
    err = assert_error(
        await _send(client, account, method, _url(path, made), body), 400, "validation_error", field=field
    )
    assert words in err["message"]


async def test_an_integral_number_is_an_integer(client, account, made):
    """JSON Schema's integer is any number without a fraction: 300.0 is one."""
    url = f"/v1/endpoints/{made['endpoint_id']}/auth-config"
    resp = await _send(client, account, "PATCH", url, {"tolerance_seconds": 300.0})
    assert resp.status_code == 200, resp.text
    assert resp.json()["tolerance_seconds"] == 300


async def test_a_lone_surrogate_escape_names_the_field_not_a_truncation(client, account):
    raw = b'{"name": "ok", "external_ref": "a\\ud800b"}'
    resp = await client.post(
        "/v1/endpoints", content=raw, headers={**account.headers, "content-type": "application/json"}
    )
    err = assert_error(resp, 400, "validation_error", field="external_ref")
    assert "truncated" not in err["message"]


@pytest.mark.parametrize("value", ["null", "1", "yes", "True", ""])
@pytest.mark.parametrize(
    ("route", "name"),
    [
        ("events", "signature_valid"),
        ("events", "provider"),
        ("deliveries", "success"),
        ("deliveries", "source"),
        ("deliveries/retry", "success"),
        ("deliveries/retry", "signature_valid"),
    ],
)
async def test_booleans_and_enums_of_a_query_are_read_as_documented(client, account, made, route, name, value):
    method = "POST" if route.endswith("retry") else "GET"
    resp = await client.request(
        method, f"/v1/endpoints/{made['endpoint_id']}/{route}", params={name: value}, headers=account.headers
    )
    assert_error(resp, 400, "validation_error", field=name)


# -- the service layer, as the MCP tools call it ------------------------------------------------------------


@pytest.fixture
async def principal(account, database_url) -> Principal:
    async with db(database_url) as conn:
        key_id = await conn.fetchval("SELECT id FROM api_keys WHERE account_id = $1", account.id)
    return Principal(account_id=account.id, key_id=key_id, kind="live")


SURROGATE = "\ud83d"  # half of an emoji: what Python's json makes of "\ud83d" with its pair cut off


async def test_the_service_refuses_what_postgres_cannot_hold_naming_the_field(ctx, principal, database_url, subtests):
    endpoint = await endpoints_service.create_endpoint(ctx, principal, EndpointCreate(name="e"))
    destination = await destinations_service.create_destination(
        ctx, principal, endpoint.id, DestinationCreate(url="https://example.com/")
    )
    async with db(database_url) as conn:
        (event_id,) = await store(conn, None, None, [Ev(endpoint.id)])
    nobody = f"http://127.0.0.1:{free_port()}/"

    def replay(**fields: Any) -> Any:
        return replay_service.replay_event(ctx, principal, event_id, ReplayRequest(**{"url": nobody, **fields}))

    tree = {"field": "body.a", "operator": "equals", "value": "v"}
    calls = {
        "name": lambda bad: endpoints_service.create_endpoint(ctx, principal, EndpointCreate(name=bad)),
        "external_ref": lambda bad: endpoints_service.update_endpoint(
            ctx, principal, endpoint.id, EndpointUpdate(external_ref=bad)
        ),
        "external_ref ": lambda bad: endpoints_service.list_endpoints(ctx, principal, external_ref=bad),
        "url": lambda bad: destinations_service.create_destination(
            ctx, principal, endpoint.id, DestinationCreate(url="https://example.com/" + bad)
        ),
        "name ": lambda bad: destinations_service.update_destination(
            ctx, principal, destination.id, DestinationUpdate(name=bad)
        ),
        "rule_name": lambda bad: destinations_service.create_destination(
            ctx, principal, endpoint.id, DestinationCreate(url="https://example.com/", forward_all=True, rule_name=bad)
        ),
        "headers.x-a": lambda bad: destinations_service.create_destination(
            ctx, principal, endpoint.id, DestinationCreate(url="https://example.com/", headers={"x-a": bad})
        ),
        "name  ": lambda bad: rules_service.create_rule(
            ctx, principal, endpoint.id, RuleCreate(name=bad, condition_tree=tree, destination_ids=[destination.id])
        ),
        "condition_tree.value": lambda bad: rules_service.create_rule(
            ctx,
            principal,
            endpoint.id,
            RuleCreate(name="r", condition_tree={**tree, "value": bad}, destination_ids=[destination.id]),
        ),
        "condition_tree.field": lambda bad: rules_service.create_rule(
            ctx,
            principal,
            endpoint.id,
            RuleCreate(name="r", condition_tree={**tree, "field": "body." + bad}, destination_ids=[destination.id]),
        ),
        "secret": lambda bad: trust_service.update_auth_config(
            ctx, principal, endpoint.id, AuthConfigUpdate(secret="whsec_" + "x" * 16 + bad)
        ),
        "cidr": lambda bad: trust_service.add_allowlist_entry(ctx, principal, endpoint.id, "192.0.2.1" + bad),
        "url   ": lambda bad: replay(url=nobody + bad),
        "headers.x-a ": lambda bad: replay(headers={"x-a": bad}),
        "signature_header": lambda bad: replay(signature_header="x-signature" + bad),
    }
    for bad in ("\x00", SURROGATE):
        for label, call in calls.items():
            field = label.strip()
            with subtests.test(field=label, bad=repr(bad)):
                with pytest.raises(ValidationError) as refused:
                    await call("a" + bad)
                assert refused.value.message.startswith(f"{field}:"), refused.value.message
                if field.startswith("condition_tree"):
                    assert isinstance(refused.value, InvalidConditionTree)
    with subtests.test(field="body (of a replay)"):
        with pytest.raises(ValidationError, match=r"^body: must not contain lone UTF-16 surrogates"):
            await replay(body="a" + SURROGATE)
        assert (await replay(body="a\x00")).error.startswith("connection failed")  # NUL is content: sent


@pytest.mark.parametrize("name", ["event_type", "method", "q", "since", "until"])
@pytest.mark.parametrize("bad", ["\x00", SURROGATE])
def test_event_filters_refuse_what_postgres_cannot_hold(name, bad):
    shown = {"event_type": "type"}.get(name, name)
    with pytest.raises(ValidationError, match=f"^{shown}: "):
        events_service.event_filters(**{name: "a" + bad})


# -- the document states it -------------------------------------------------------------------------------


def _parameter(document: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    parameters = document["paths"][path]["get"]["parameters"]
    return next(p for p in parameters if p["name"] == name)["schema"]


async def test_the_document_states_formats_patterns_and_limits(document):
    schemas = document["components"]["schemas"]
    events = "/v1/endpoints/{endpoint_id}/events"
    url = schemas["DestinationCreate"]["properties"]["url"]
    assert (url["format"], url["maxLength"]) == ("uri", 2048)
    assert url["pattern"].startswith("^[Hh][Tt][Tt][Pp][Ss]?://")
    assert schemas["AllowlistCreate"]["properties"]["cidr"]["format"] == "cidr"
    assert schemas["ConditionRegexLeaf"]["properties"]["value"]["format"] == "re2"
    for name in ("since", "until"):
        instant = _parameter(document, events, name)
        assert instant["anyOf"] == [{"format": "date-time"}, {"format": "date"}]
        assert instant["pattern"].startswith("^(?:000[2-9]")
    for listing in (events, "/v1/endpoints/{endpoint_id}/deliveries"):
        assert _parameter(document, listing, "cursor")["pattern"] == "^[A-Za-z0-9_-]{1,200}$"
    replay = schemas["ReplayRequest"]["properties"]
    assert replay["url"] == url
    assert replay["headers"]["propertyNames"]["pattern"] == "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$"
    assert replay["headers"]["additionalProperties"]["pattern"] == r"^[^\x00-\x08\x0a-\x1f\x7f]*$"
    assert replay["signature_header"]["not"] == replay["headers"]["propertyNames"]["not"]
    assert _parameter(document, events, "limit") | {"description": ""} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 20,
        "description": "",
    }
    assert _parameter(document, events, "provider")["enum"] == ["identity", "commerce", "payments", "code_host"]
    assert _parameter(document, events, "endpoint_id")["pattern"] == "^ep_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
    assert _parameter(document, "/v1/endpoints", "external_ref")["minLength"] == 1
    rule = schemas["RuleCreate"]["properties"]
    assert rule["destination_ids"]["items"]["pattern"].startswith("^dst_")
    assert rule["destination_ids"]["uniqueItems"] is True
    assert [r["$ref"].rsplit("/", 1)[1] for r in rule["condition_tree"]["oneOf"]] == [
        "ConditionGroup",
        "ConditionLeaf",
        "ConditionRegexLeaf",
        "ConditionExistsLeaf",
    ]
    for name, schema in schemas.items():
        if name.endswith(("Create", "Update")) or name.startswith("Condition"):
            assert schema.get("additionalProperties") is False, name
    # a query parameter is absent or a value: never null; a path id has the shape of its kind
    for path, item in document["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    assert "null" not in json.dumps(parameter["schema"]), (path, parameter["name"])
                else:
                    assert parameter["schema"]["pattern"].endswith("_[0-7][0-9A-HJKMNP-TV-Z]{25}$"), path


@pytest.mark.parametrize("email", ["a@b\x00.com", "a@b\udcff.com"], ids=["nul", "argv-byte"])
async def test_an_account_email_postgres_cannot_hold_is_refused(database_url, email):
    """``hookyard account create --email`` reads argv, where a byte that is not UTF-8 is a lone surrogate."""
    async with db(database_url) as conn:
        with pytest.raises(ValidationError, match=r"^email: must not contain"):
            await create_account(conn, email=email)
        assert await conn.fetchval("SELECT count(*) FROM accounts") == 0
