"""The error envelope ``{"error": {"code", "message"}}`` on every non-2xx, framework errors included."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import control
import control.service.endpoints as endpoints_service
import edge
import shared
import shared.errors
from control.api.errors import STATUSES, status_of
from shared.errors import (
    ConflictError,
    ErrorEnvelope,
    HookyardError,
    NotFoundError,
    RateLimitedError,
    ServiceError,
    ValidationError,
    envelope,
)
from tests.helpers import (
    assert_error,
    create_endpoint,
    db,
    module_database_url,  # noqa: F401 - fixtures
    refusing_connections,
)

MIB = 1_048_576


async def test_framework_errors_use_the_envelope(client, account, subtests):
    with subtests.test("unknown route"):
        resp = await client.get("/nope")
        err = assert_error(resp, 404, "not_found")
        assert "/nope" in err["message"]
    with subtests.test("unknown route under /v1"):
        assert_error(await client.get("/v1/nothing-here", headers=account.headers), 404, "not_found")
    with subtests.test("unknown nested route"):
        resp = await client.get("/v1/endpoints/ep_x/unknown/deeper", headers=account.headers)
        assert_error(resp, 404, "not_found")
    with subtests.test("method not allowed"):
        resp = await client.put("/v1/endpoints", json={"name": "x"}, headers=account.headers)
        err = assert_error(resp, 405, "method_not_allowed")
        assert "PUT" in err["message"]
        allowed = {m.strip() for m in resp.headers["allow"].split(",")}
        assert {"GET", "POST"} <= allowed
        assert "PUT" not in allowed
    with subtests.test("method not allowed on an item"):
        resp = await client.post("/v1/endpoints/ep_x", json={}, headers=account.headers)
        assert_error(resp, 405, "method_not_allowed")
        assert {"GET", "PATCH", "DELETE"} <= {m.strip() for m in resp.headers["allow"].split(",")}


class _AnyId(dict):
    """Every path parameter gets an id-looking value: the route matters here, not the object."""

    def __missing__(self, name: str) -> str:
        return f"{name[:2]}_x"


async def test_options_lists_every_method_of_every_path_without_credentials(client, account, subtests):
    """Litestar's own OPTIONS answer listed the methods of one handler of the path (``OPTIONS
    /v1/endpoints/{id}`` said ``DELETE, OPTIONS``). A CORS preflight carries no credentials, and the methods
    are no secret (the document lists them), so none are asked for."""
    document = (await client.get("/schema/openapi.json")).json()
    for path, item in document["paths"].items():
        documented = {method.upper() for method in item} | {"OPTIONS"}
        url = path.format_map(_AnyId())
        with subtests.test(path=path):
            resp = await client.options(url)
            assert resp.status_code == 204, resp.text
            assert resp.content == b""
            assert [m.strip() for m in resp.headers["allow"].split(",")] == sorted(documented)
        with subtests.test(path=path, method="PUT"):
            resp = await client.put(url, json={}, headers=account.headers)
            assert_error(resp, 405, "method_not_allowed")
            assert [m.strip() for m in resp.headers["allow"].split(",")] == sorted(documented)


BAD_BODIES = {
    "malformed JSON": b'{"name": ',
    "trailing garbage": b'{"name": "x"} x',
    "not UTF-8": b'{"name": "\xff\xfe"}',
    "raw binary": b"\xff\xfe\x00\x01",
    "array": b"[]",
    "string": b'"x"',
    "number": b"42",
    "null": b"null",
    "empty": b"",
}


async def test_bad_json_bodies_are_400_naming_the_body(client, account, database_url, subtests):
    for name, raw in BAD_BODIES.items():
        with subtests.test(name):
            resp = await client.post(
                "/v1/endpoints", content=raw, headers={**account.headers, "content-type": "application/json"}
            )
            err = assert_error(resp, 400, "validation_error", field="body")
            assert "'data'" not in err["message"], "a framework internal leaked into the message"
        with subtests.test(f"{name} on PATCH"):
            resp = await client.patch(
                "/v1/endpoints/ep_x", content=raw, headers={**account.headers, "content-type": "application/json"}
            )
            assert_error(resp, 400, "validation_error", field="body")
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", account.id) == 0


async def test_field_errors_name_the_field(client, account, subtests):
    cases = [
        ({"name": "x", "unexpected": 1}, "unexpected", "unknown field"),
        ({"environment": "staging"}, "name", "required"),
        ({"name": 12}, "name", "str"),
        ({"name": ["x"]}, "name", "str"),
        ({"name": "x", "environment": "qa"}, "environment", "qa"),
        ({"name": "x", "external_ref": {"a": 1}}, "external_ref", "str"),
    ]
    for payload, field, words in cases:
        with subtests.test(payload=payload):
            resp = await client.post("/v1/endpoints", json=payload, headers=account.headers)
            err = assert_error(resp, 400, "validation_error", field=field)
            assert words in err["message"]


async def test_body_size_limit_is_twice_max_body_bytes_with_1_mib_floor(client, account, settings, database_url):
    limit = max(MIB, 2 * settings.max_body_bytes)
    too_big = b'{"name": "' + b"x" * limit + b'"}'
    resp = await client.post(
        "/v1/endpoints", content=too_big, headers={**account.headers, "content-type": "application/json"}
    )
    err = assert_error(resp, 413, "payload_too_large")
    assert err["message"].startswith("body")

    # Just under the limit is parsed (and then rejected for what it says, not for its size).
    under = b'{"name": "x", "pad": "' + b"x" * (limit - 100) + b'"}'
    assert len(under) < limit
    resp = await client.post(
        "/v1/endpoints", content=under, headers={**account.headers, "content-type": "application/json"}
    )
    assert_error(resp, 400, "validation_error", field="pad")
    async with db(database_url) as conn:
        assert await conn.fetchval("SELECT count(*) FROM endpoints WHERE account_id = $1", account.id) == 0


async def test_unexpected_failures_are_500_internal_error_without_details(client, account, monkeypatch, caplog):
    async def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret detail from deep inside")

    monkeypatch.setattr(endpoints_service, "list_endpoints", boom)
    with caplog.at_level("ERROR", logger="hookyard.control"):
        resp = await client.get("/v1/endpoints", headers=account.headers)
    err = assert_error(resp, 500, "internal_error")
    assert "secret detail" not in resp.text
    assert "RuntimeError" not in err["message"]
    assert any("secret detail" in (r.exc_text or "") or r.exc_info for r in caplog.records), "the failure is logged"


async def test_a_unicode_error_of_our_own_is_500_not_a_client_error(client, account, monkeypatch, caplog):
    async def boom(*args: object, **kwargs: object) -> None:
        b"\xff".decode()

    monkeypatch.setattr(endpoints_service, "list_endpoints", boom)
    with caplog.at_level("ERROR", logger="hookyard.control"):
        resp = await client.get("/v1/endpoints", headers=account.headers)
    assert_error(resp, 500, "internal_error")


async def test_service_errors_keep_their_status_code_and_message(client, account):
    made = await create_endpoint(client, account.headers, external_ref="a")
    await create_endpoint(client, account.headers, external_ref="b")
    resp = await client.patch(f"/v1/endpoints/{made['id']}", json={"external_ref": "b"}, headers=account.headers)
    err = assert_error(resp, 409, "external_ref_taken")
    assert err["message"] == "external_ref: 'b' is already used by another endpoint of this account"


def test_error_tree_statuses_and_codes():
    assert (status_of(ValidationError("x")), ValidationError("x").code) == (400, "validation_error")
    assert (status_of(NotFoundError("x")), NotFoundError("x").code) == (404, "not_found")
    assert ConflictError("x", code="external_ref_taken").code == "external_ref_taken"
    assert ConflictError("x").code == "conflict", "a per-instance code must not leak into the class"
    limited = RateLimitedError("slow down", retry_after_s=3)
    assert (status_of(limited), limited.code, limited.retry_after_s, limited.message) == (
        429,
        "rate_limited",
        3,
        "slow down",
    )


# The statuses on the wire before they moved out of shared/errors.py; they must not change.
WIRE = {
    "ServiceError": (400, "bad_request"),
    "ValidationError": (400, "validation_error"),
    "InvalidConditionTree": (400, "invalid_condition_tree"),
    "UnauthorizedError": (401, "unauthorized"),
    "ForbiddenError": (403, "forbidden"),
    "QuotaExceededError": (403, "quota_exceeded"),
    "NotFoundError": (404, "not_found"),
    "GoneError": (410, "gone"),
    "ConflictError": (409, "conflict"),
    "PayloadTooLargeError": (413, "payload_too_large"),
    "UnsupportedEncodingError": (415, "unsupported_content_encoding"),
    "RateLimitedError": (429, "rate_limited"),
}


def _our_modules():
    for package in (control, edge, shared):
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            yield importlib.import_module(info.name)


def _error_classes() -> dict[str, type[BaseException]]:
    """Every public exception class defined in control, edge and shared (private ones are a module's own
    signals, caught where they are raised)."""
    found = {}
    for module in _our_modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[name] = value
    return found


def test_every_error_class_is_in_the_one_tree_drawn_in_shared_errors():
    classes = _error_classes()
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, HookyardError))
    assert not outside, f"not under HookyardError: {outside}"
    drawn = re.findall(r"^ *[*x+\-·] (\w+)", shared.errors.__doc__, flags=re.MULTILINE)
    assert sorted(drawn) == sorted(classes), "shared/errors.py's tree and the classes differ"
    elsewhere = sorted(n for n, c in classes.items() if c.__module__ != "shared.errors")
    assert elsewhere == [], elsewhere


def test_statuses_are_the_edges_not_the_trees():
    classes = _error_classes()
    assert not [n for n, c in classes.items() if "status" in dir(c)], "an HTTP status in the error tree"
    services = {name: cls for name, cls in classes.items() if issubclass(cls, ServiceError)}
    assert set(services) == set(WIRE)
    for name, cls in services.items():
        args = {"retry_after_s": 1} if cls is RateLimitedError else {}
        error = cls("x", **args)
        assert (status_of(error), error.code) == WIRE[name], name
    assert set(STATUSES) <= set(services.values())


def test_envelope_encodes_to_the_documented_shape():
    import msgspec

    raw = msgspec.json.encode(envelope("not_found", "endpoint 'ep_1' not found"))
    assert msgspec.json.decode(raw) == {"error": {"code": "not_found", "message": "endpoint 'ep_1' not found"}}
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"error": {"code": "x"}}', type=ErrorEnvelope)


async def test_postgres_unavailable_is_503_with_retry_after_not_500(client, account, servers, database_url, caplog):
    """Refused connections and terminated backends: the request was fine, the store is away; retry later."""
    async with refusing_connections(servers, database_url):
        for path in ("/v1/endpoints", "/v1/endpoints/ep_01KAAAAAAAAAAAAAAAAAAAAAAA/events"):
            resp = await client.get(path, headers=account.headers)
            error = assert_error(resp, 503, "unavailable")
            assert error["message"] == "the database is unavailable; retry shortly"
            assert resp.headers["retry-after"] == "2"
        assert not [r for r in caplog.records if r.levelname == "ERROR"]  # an outage is not our bug
    assert (await client.get("/v1/endpoints", headers=account.headers)).status_code == 200
