"""Bad values past the strings: instants outside the calendar, unknown fields, strict JSON types, query
booleans and enums, what the service functions (the MCP tools call them) refuse before Postgres could, and
the document's own statements (issue 13)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control.db.context import Principal
from control.records.destinations import DestinationCreate, DestinationUpdate
from control.records.endpoints import EndpointCreate, EndpointUpdate
from control.records.replay import ReplayRequest
from control.records.rules import RuleCreate
from control.records.trust import AuthConfigUpdate
from control.routing.conditions import InvalidConditionTree
from control.service import endpoints as endpoints_service
from control.service import replay as replay_service
from control.service import rules as rules_service
from control.service import trust as trust_service
from control.service.accounts import create_account
from control.service.destinations import crud as destinations_service
from control.service.events import read as events_service
from shared.errors import ValidationError
from tests.control.bad_input.walk import _bodies, _operations, _send, _url, body_ref
from tests.events_support import Ev, store
from tests.helpers import assert_error, db
from tests.stack import free_port

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
        params={name: value} | ({"timeout": 1} if route == "/wait" else {}),
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
        with subtests.test(operation=operation_id):
            assert document["components"]["schemas"][body_ref(operation)]["additionalProperties"] is False
            body = {**bodies[operation_id], "surplus": 1}
            resp = await _send(client, account, method, _url(path, made), body)
            err = assert_error(resp, 400, "validation_error", field="surplus")
            assert err["message"] == "surplus: unknown field"


STRICT = [
    ("UpdateAuthConfig", {"hmac_enabled": "true"}, "hmac_enabled", 'hmac_enabled: must be true or false, got "true"'),
    ("UpdateAuthConfig", {"log_blocked_ips": 0}, "log_blocked_ips", "log_blocked_ips: must be true or false, got 0"),
    (
        "UpdateAuthConfig",
        {"tolerance_seconds": "300"},
        "tolerance_seconds",
        'tolerance_seconds: must be an integer from 1 to 2592000, got "300"',
    ),
    (
        "UpdateAuthConfig",
        {"tolerance_seconds": 1.5},
        "tolerance_seconds",
        "tolerance_seconds: must be an integer from 1 to 2592000, got 1.5",
    ),
    ("UpdateRule", {"active": 1}, "active", "active: must be true or false, got 1"),
    (
        "CreateDestination",
        {"url": "https://example.com/", "forward_all": "false"},
        "forward_all",
        'forward_all: must be true or false, got "false"',
    ),
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
    optional = {k: v for k, v in replay["url"].items() if k != "oneOf"}  # null: with destination_id
    assert optional == {k: v for k, v in url.items() if k != "type"}
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
    providers = _parameter(document, events, "provider")["enum"]  # every catalog name and alias
    assert {"identity", "commerce", "payments", "code_host", "stripe", "github", "slack", "meta"} <= set(providers)
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
