"""shared.attribution: provider, event type and idempotency key from headers (and, for two providers, the body).
Pure unit tests: no servers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import attribution, samples
from shared.attribution import PROVIDERS, Attribution
from shared.headers import raw_headers
from shared.signatures import SCHEMES

# The providers' own event names: the ones their samples are made of (shared/samples, docs/reference/events.md).
IDENTITY_TYPES = samples.EVENT_TYPES["identity"]
COMMERCE_TOPICS = samples.EVENT_TYPES["commerce"]
PAYMENTS_TYPES = samples.EVENT_TYPES["payments"]
CODE_HOST_EVENTS = samples.EVENT_TYPES["code_host"]

NONE = Attribution(None, None, None)

IMPLEMENTATIONS = {"compiled": attribution.attribute, "python": attribution._attribute}
attribute_raw = attribution.attribute
"""The implementation under test (set per module run by ``implementation``)."""


@pytest.fixture(scope="module", autouse=True, params=list(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs twice: through the compiled fast path in front of the Python function (what the
    edge runs), and through the Python function alone (what runs where shared._native is not built)."""
    global attribute_raw
    if request.param == "compiled" and attribution._native is None:
        pytest.fail("shared._native is not built here (tests/unit/signatures/test_mac.py checks the build)")
    attribute_raw = IMPLEMENTATIONS[request.param]
    yield request.param
    attribute_raw = attribution.attribute


def attribute(headers: dict[str, str], body: bytes) -> Attribution:
    """Headers written as text, handed over in the raw form the edge reads (shared.headers)."""
    return attribute_raw(raw_headers(headers), body)


def identity_body(event_type: object) -> bytes:
    return json.dumps({"data": {"id": "user_1", "type": "nested"}, "object": "event", "type": event_type}).encode()


def payments_body(event_type: object, event_id: object = "evt_1NG8Du2eZvKYlo2CUI79vXWy") -> bytes:
    return json.dumps(
        {"id": event_id, "object": "event", "data": {"object": {"id": "pi_1", "type": "card"}}, "type": event_type}
    ).encode()


def test_providers_are_the_signature_schemes() -> None:
    assert PROVIDERS == SCHEMES


# -- identity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", IDENTITY_TYPES)
@pytest.mark.parametrize("family", ["relay", "webhook", "svix"])
def test_identity(event_type: str, family: str) -> None:
    headers = {
        f"{family}-id": "msg_2Lg3Xb",
        f"{family}-timestamp": "1700000000",
        f"{family}-signature": "v1,abc=",
        "content-type": "application/json",
    }
    assert attribute(headers, identity_body(event_type)) == Attribution("identity", event_type, "msg_2Lg3Xb")


@pytest.mark.parametrize("family", ["relay", "webhook", "svix"])
def test_identity_recognised_by_id_or_signature_alone(family: str) -> None:
    body = identity_body("user.created")
    assert attribute({f"{family}-id": "msg_1"}, body) == Attribution("identity", "user.created", "msg_1")
    assert attribute({f"{family}-signature": "v1,x"}, body) == Attribution("identity", "user.created", None)


def test_identity_neutral_id_first() -> None:
    headers = {"svix-id": "msg_svix", "relay-id": "msg_relay", "webhook-id": "msg_std"}
    assert attribute(headers, b"{}").idempotency_key == "msg_relay"


# -- commerce ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("topic", COMMERCE_TOPICS)
@pytest.mark.parametrize("prefix", ["x-shop", "x-shopify"])
def test_commerce(topic: str, prefix: str) -> None:
    headers = {
        f"{prefix}-topic": topic,
        f"{prefix}-hmac-sha256": "abc=",
        f"{prefix}-shop-domain": "example.myshopify.com",
        f"{prefix}-webhook-id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        f"{prefix}-event-id": "98880550-7158-44d4-b7cd-2c97c8a091b5",
        f"{prefix}-api-version": "2025-10",
    }
    # the webhook id (stable across retries) is the key, never the event id; the body is not read
    assert attribute(headers, b"not json at all") == Attribution(
        "commerce", topic, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
    )


def test_commerce_without_webhook_id() -> None:
    headers = {"x-shop-topic": "orders/paid", "x-shop-event-id": "e1"}
    assert attribute(headers, b"{}") == Attribution("commerce", "orders/paid", None)


def test_commerce_mixed_names() -> None:
    headers = {"x-shopify-topic": "orders/paid", "x-shop-webhook-id": "w1"}
    assert attribute(headers, b"{}") == Attribution("commerce", "orders/paid", "w1")


# -- payments ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", PAYMENTS_TYPES)
@pytest.mark.parametrize("header", ["pay-signature", "stripe-signature"])
def test_payments(event_type: str, header: str) -> None:
    headers = {header: "t=1700000000,v1=ab", "content-type": "application/json; charset=utf-8"}
    assert attribute(headers, payments_body(event_type)) == Attribution(
        "payments", event_type, "evt_1NG8Du2eZvKYlo2CUI79vXWy"
    )


def test_payments_non_string_id() -> None:
    headers = {"pay-signature": "t=1,v1=ab"}
    assert attribute(headers, payments_body("invoice.paid", 17)) == Attribution("payments", "invoice.paid", None)
    assert attribute(headers, payments_body(None, None)) == Attribution("payments", None, None)


# -- code host --------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", CODE_HOST_EVENTS)
@pytest.mark.parametrize(
    "names", [("x-codehost-event", "x-codehost-delivery"), ("x-github-event", "x-github-delivery")]
)
def test_code_host(event: str, names: tuple[str, str]) -> None:
    headers = {names[0]: event, names[1]: "72d3162e-cc78-11e3-81ab-4c9367dc0958", "x-hub-signature-256": "sha256=0"}
    assert attribute(headers, b"payload=not-json") == Attribution(
        "code_host", event, "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    )


# -- bodies the type cannot come from ---------------------------------------------------------------

ODD_BODIES = [
    b"",
    b"not json",
    b"\xff\xfe\x00\x80",
    b'["user.created"]',
    b'"user.created"',
    b"17",
    b"null",
    b'{"type": 5}',
    b'{"type": null}',
    b'{"type": true}',
    b'{"type": ["user.created"]}',
    b'{"type": {"name": "user.created"}}',
    b'{"type": ""}',
    b'{"type": "user.created"',  # truncated
    b'{"type": "user.created", "data": }',  # broken after the field
    b'{"data":' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # nested beyond any recursion limit
]


@pytest.mark.parametrize("body", ODD_BODIES)
def test_odd_bodies_give_no_event_type(body: bytes) -> None:
    assert attribute({"relay-id": "msg_1"}, body) == Attribution("identity", None, "msg_1")
    assert attribute({"stripe-signature": "t=1,v1=a"}, body) == Attribution("payments", None, None)


def test_escaped_and_unicode_type() -> None:
    body = b'{"type": "user.cr\\u00e9ated\\n"}'
    assert attribute({"relay-id": "m"}, body).event_type == "user.créated\n"


def test_huge_body_reads_only_what_it_needs() -> None:
    filler = json.dumps({"rows": [{"k": i, "v": "x" * 50} for i in range(20_000)]})
    body = b'{"id": "evt_big", "data": ' + filler.encode() + b', "type": "invoice.paid"}'
    assert len(body) > 1_000_000
    assert attribute({"pay-signature": "t=1,v1=a"}, body) == Attribution("payments", "invoice.paid", "evt_big")


# -- unattributed and precedence --------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content-type": "application/json", "user-agent": "curl/8"},
        {"x-hub-signature-256": "sha256=00"},  # a signature alone does not name the code host's event
        {"x-shop-hmac-sha256": "abc="},
        {"x-shop-topic": "", "relay-id": "", "x-github-event": ""},  # empty headers count as absent
        {"x-webhook-id": "1", "x-event-type": "user.created"},
    ],
)
def test_unattributed(headers: dict[str, str]) -> None:
    assert attribute(headers, identity_body("user.created")) == NONE


def test_fixed_precedence() -> None:
    headers = {"svix-id": "m", "x-shopify-topic": "orders/paid", "stripe-signature": "t", "x-github-event": "push"}
    assert attribute(headers, identity_body("user.created")).provider == "identity"
    del headers["svix-id"]
    assert attribute(headers, b"{}").provider == "commerce"
    del headers["x-shopify-topic"]
    assert attribute(headers, b"{}").provider == "payments"
    del headers["stripe-signature"]
    assert attribute(headers, b"{}").provider == "code_host"


@given(
    headers=st.dictionaries(
        st.sampled_from(
            ["relay-id", "svix-signature", "x-shop-topic", "x-shopify-webhook-id", "pay-signature", "x-github-event"]
        ),
        st.text(max_size=20),
        max_size=4,
    ),
    body=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
            lambda children: (
                st.lists(children, max_size=3)
                | st.dictionaries(st.sampled_from(["type", "id", "x"]), children, max_size=3)
            ),
            max_leaves=10,
        ).map(msgspec.json.encode),
    ),
)
def test_never_raises(headers: dict[str, str], body: bytes) -> None:
    result = attribute(headers, body)
    assert result.provider is None or result.provider in PROVIDERS
    assert result.event_type is None or (isinstance(result.event_type, str) and result.event_type)
    assert result.idempotency_key is None or isinstance(result.idempotency_key, str)


def test_header_values_are_utf8_else_latin1() -> None:
    """Taken from the raw bytes by the rule the stored event's headers use (shared.headers.header_text)."""
    assert attribute_raw({b"x-shop-topic": "orders/payé".encode()}, b"{}").event_type == "orders/payé"
    assert attribute_raw({b"x-github-event": b"pu\xe9sh", b"x-github-delivery": b"d\xff"}, b"") == (
        Attribution("code_host", "pu\xe9sh", "d\xff")
    )


def test_attribution_is_a_frozen_struct() -> None:
    found = attribute({"stripe-signature": "t=1,v1=a"}, payments_body("invoice.paid"))
    assert (found.provider, found.event_type) == ("payments", "invoice.paid")
    with pytest.raises(AttributeError):
        found.provider = "identity"  # type: ignore[misc]
