"""Condition trees: every operator on every kind of field, meta keys, missing and null values, and body
roots and paths."""

from __future__ import annotations

import re

import pytest

from control.routing.conditions import META_KEYS, MISSING, OPERATORS, EventView, text_form
from tests.unit.conditions.support import EVENT, META, NO_VALUE, check, leaf

CASES = [
    # equals: text forms, numbers as numbers
    ("body.type", "equals", "invoice.paid", True),
    ("body.type", "equals", "invoice", False),
    ("body.type", "equals", "INVOICE.PAID", False),
    ("body.amount", "equals", 2000, True),
    ("body.amount", "equals", "2000", True),
    ("body.amount", "equals", 2000.0, True),
    ("body.amount", "equals", "2e3", True),
    ("body.amount", "equals", "2000.5", False),
    ("body.amount", "equals", 2001, False),
    ("body.amount", "equals", True, False),
    ("body.ratio", "equals", 20.5, True),
    ("body.ratio", "equals", "20.5", True),
    ("body.ratio", "equals", "20.50", True),
    ("body.big", "equals", "1000000000000000000000000000000", True),
    ("body.big", "equals", 10**30, True),
    ("body.paid", "equals", True, True),
    ("body.paid", "equals", "true", True),
    ("body.paid", "equals", 1, False),
    ("body.paid", "equals", "True", False),
    ("body.refunded", "equals", False, True),
    ("body.refunded", "equals", "false", True),
    ("body.refunded", "equals", "", False),
    ("body.note", "equals", None, True),
    ("body.note", "equals", "null", True),
    ("body.note", "equals", "", False),
    ("body.empty", "equals", "", True),
    ("body.empty", "equals", None, False),
    ("body.nested", "equals", '{"k":1,"list":[]}', True),
    ("body.nested.list", "equals", "[]", True),
    ("body.data.object.tags", "equals", '["vip","eu",3,true,null]', True),
    ("header.x-count", "equals", 5, True),
    ("header.x-count", "equals", "5", True),
    ("header.x-count", "equals", 5.0, False),  # a header is a string: "5" is not "5.0"
    # not_equals is the negation of equals
    ("body.type", "not_equals", "invoice.paid", False),
    ("body.type", "not_equals", "other", True),
    ("body.amount", "not_equals", "2000", False),
    ("body.paid", "not_equals", "true", False),
    ("body.note", "not_equals", None, False),
    ("body.note", "not_equals", "x", True),
    # contains: substring on strings, membership on arrays, key on objects, text form otherwise
    ("body.type", "contains", "paid", True),
    ("body.type", "contains", "", True),
    ("body.type", "contains", "PAID", False),
    ("body.data.object.tags", "contains", "vip", True),
    ("body.data.object.tags", "contains", "vi", False),
    ("body.data.object.tags", "contains", 3, True),
    ("body.data.object.tags", "contains", "3", True),
    ("body.data.object.tags", "contains", True, True),
    ("body.data.object.tags", "contains", "true", True),
    ("body.data.object.tags", "contains", None, True),
    ("body.data.object.tags", "contains", "us", False),
    ("body.nested.list", "contains", "", False),
    ("body.data.object", "contains", "id", True),
    ("body.data.object", "contains", "in_1", False),
    ("body.amount", "contains", "00", True),
    ("body.amount", "contains", 20, True),
    ("body.amount", "contains", "3", False),
    ("body.paid", "contains", "ru", True),
    ("body.note", "contains", "ul", True),
    # exists: present, even null
    ("body.type", "exists", NO_VALUE, True),
    ("body.note", "exists", NO_VALUE, True),
    ("body.empty", "exists", NO_VALUE, True),
    ("body.refunded", "exists", NO_VALUE, True),
    ("body.nope", "exists", NO_VALUE, False),
    ("body", "exists", NO_VALUE, True),
    # regex: RE2 search over the text form
    ("body.type", "regex", r"^invoice\.", True),
    ("body.type", "regex", "paid$", True),
    ("body.type", "regex", "^paid", False),
    ("body.type", "regex", "(?i)INVOICE", True),
    ("body.type", "regex", "INVOICE", False),
    ("body.amount", "regex", "^20+$", True),
    ("body.ratio", "regex", r"^\d+\.5$", True),
    ("body.paid", "regex", "^true$", True),
    ("body.note", "regex", "^null$", True),
    ("body.data.object.tags", "regex", '"vip"', True),
    ("body.data.object.lines.1", "regex", '"qty":1', True),
    ("body.empty", "regex", "^$", True),
    ("body.empty", "regex", ".", False),
    # nested paths and array indices
    ("body.data.object.id", "equals", "in_1", True),
    ("body.data.object.lines.0.sku", "equals", "A-1", True),
    ("body.data.object.lines.1.sku", "equals", "B-2", True),
    ("body.data.object.lines.1.qty", "equals", 1, True),
    ("body.data.object.lines.2.sku", "exists", NO_VALUE, False),
    ("body.data.object.lines.00.sku", "equals", "A-1", True),
    ("body.data.object.lines.-1.sku", "exists", NO_VALUE, False),
    ("body.data.object.lines.x", "exists", NO_VALUE, False),
    ("body.data.object.tags.4", "exists", NO_VALUE, True),
    ("body.data.object.tags.4", "equals", None, True),
    ("body.0", "equals", "zero key", True),  # a numeric segment is an ordinary key on an object
    ("body.type.x", "exists", NO_VALUE, False),  # no descending into a string
    ("body.amount.0", "exists", NO_VALUE, False),
    ("body.data.object.lines.99999999999999999999999", "exists", NO_VALUE, False),
    # headers: names case-insensitive
    ("header.x-shop-topic", "equals", "orders/create", True),
    ("header.X-Shop-Topic", "equals", "orders/create", True),
    ("header.X-SHOP-TOPIC", "contains", "orders", True),
    ("header.x-shop-topic", "equals", "Orders/Create", False),
    ("header.Content-Type", "regex", "^application/json$", True),
    ("header.x-missing", "exists", NO_VALUE, False),
    ("header.x-shop-topic", "exists", NO_VALUE, True),
]


@pytest.mark.parametrize(("field", "operator", "value", "expected"), CASES)
def test_operator_on_field(field, operator, value, expected):
    assert check(leaf(field, operator, value), EVENT) is expected


@pytest.mark.parametrize("key", META_KEYS)
def test_every_meta_key_is_readable(key):
    value = META[key]
    assert check(leaf(f"meta.{key}", "exists"), EVENT) is True
    assert check(leaf(f"meta.{key}", "equals", value), EVENT) is True
    assert check(leaf(f"meta.{key}", "equals", text_form(value)), EVENT) is True
    assert check(leaf(f"meta.{key}", "not_equals", value), EVENT) is False
    other = "code_host" if key == "provider" else "something else"  # a provider rule takes only providers
    assert check(leaf(f"meta.{key}", "not_equals", other), EVENT) is True
    assert check(leaf(f"meta.{key}", "contains", text_form(value)[:2]), EVENT) is True
    assert check(leaf(f"meta.{key}", "regex", "^" + re.escape(text_form(value)) + "$"), EVENT) is True
    # a null meta value (unattributed provider, verification off, ...) is missing
    nulled = EventView(body=EVENT.body, headers=EVENT.headers, meta={**META, key: None})
    assert check(leaf(f"meta.{key}", "exists"), nulled) is False
    assert check(leaf(f"meta.{key}", "equals", value), nulled) is False
    assert check(leaf(f"meta.{key}", "not_equals", value), nulled) is True
    absent = EventView(body=EVENT.body, headers=EVENT.headers, meta={})
    assert check(leaf(f"meta.{key}", "exists"), absent) is False


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("meta.signature_valid", True, True),
        ("meta.signature_valid", "true", True),
        ("meta.signature_valid", False, False),
        ("meta.ip_allowed", False, True),
        ("meta.ip_allowed", "false", True),
        ("meta.method", "post", False),
        ("meta.source_ip", "203.0.113.7", True),
    ],
)
def test_meta_comparisons(field, value, expected):
    assert check(leaf(field, "equals", value), EVENT) is expected


MISSING_FIELDS = [
    ("body.nope", EVENT),
    ("body.data.nope.deeper", EVENT),
    ("body.data.object.lines.5", EVENT),
    ("body.type.length", EVENT),
    ("header.x-nope", EVENT),
    ("meta.provider", EventView(body={}, meta={"provider": None})),
    ("body", EventView(body=MISSING)),  # not JSON
    ("body.type", EventView(body=MISSING, headers=EVENT.headers, meta=META)),
    ("body.a", EventView(body="just a string")),
    ("body.0", EventView(body=[])),
]


@pytest.mark.parametrize(("field", "event"), MISSING_FIELDS)
@pytest.mark.parametrize("operator", OPERATORS)
def test_a_missing_field_makes_every_operator_false_but_not_equals(field, event, operator):
    value = {"exists": NO_VALUE, "regex": ".*"}.get(operator, "payments" if field == "meta.provider" else "")
    assert check(leaf(field, operator, value), event) is (operator == "not_equals")


@pytest.mark.parametrize("value", ["null", None, "", "x", 0, False])
def test_missing_is_not_null(value):
    event = EventView(body={"a": None})
    assert check(leaf("body.b", "equals", value), event) is False
    assert check(leaf("body.b", "not_equals", value), event) is True


@pytest.mark.parametrize(
    ("body", "field", "value", "expected"),
    [
        ("hello", "body", "hello", True),
        (2000, "body", "2000", True),
        (None, "body", None, True),
        ([{"a": 1}], "body.0.a", 1, True),
        ([{"a": 1}], "body.1.a", 1, False),
        ([[1, 2], [3]], "body.1.0", 3, True),
        ({"a": {"b": {"c": {"d": "deep"}}}}, "body.a.b.c.d", "deep", True),
        ({"a.b": 1}, "body.a.b", 1, False),  # dots always split the path
    ],
)
def test_body_roots_and_paths(body, field, value, expected):
    assert check(leaf(field, "equals", value), EventView(body=body)) is expected
