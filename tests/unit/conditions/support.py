"""What the condition-tree modules share: a sample event and its meta, and builders for leaves and groups."""

from __future__ import annotations

from typing import Any

from control.routing.conditions import EventView, compile_tree, validate

NO_VALUE = object()  # a leaf without "value"


META = {
    "provider": "payments",
    "event_type": "invoice.paid",
    "method": "POST",
    "path": "/sub/path",
    "content_type": "application/json; charset=utf-8",
    "source_ip": "203.0.113.7",
    "signature_valid": True,
    "ip_allowed": False,
    "endpoint_id": "ep_01JAAAAAAAAAAAAAAAAAAAAAAA",
    "environment": "staging",
}


EVENT = EventView(
    body={
        "type": "invoice.paid",
        "amount": 2000,
        "ratio": 20.5,
        "paid": True,
        "refunded": False,
        "note": None,
        "empty": "",
        "0": "zero key",
        "big": 10**30,
        "nested": {"k": 1, "list": []},
        "data": {
            "object": {
                "id": "in_1",
                "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
                "tags": ["vip", "eu", 3, True, None],
            }
        },
    },
    headers={"x-shop-topic": "orders/create", "content-type": "application/json", "x-count": "5"},
    meta=META,
)


def leaf(field: str, operator: str, value: Any = NO_VALUE) -> dict[str, Any]:
    node: dict[str, Any] = {"field": field, "operator": operator}
    if value is not NO_VALUE:
        node["value"] = value
    return node


def group(op: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"op": op, "children": list(children)}


def check(tree: dict[str, Any], event: EventView) -> bool:
    result = compile_tree(validate(tree))(event)
    assert type(result) is bool
    return result


T = leaf("body.type", "equals", "invoice.paid")


F = leaf("body.type", "equals", "nope")


def nest(depth: int, innermost: dict[str, Any]) -> dict[str, Any]:
    """``depth`` levels in all: depth-1 groups, alternating AND/OR, around ``innermost``."""
    tree = innermost
    for level in range(depth - 1):
        tree = group("AND" if level % 2 else "OR", tree)
    return tree
