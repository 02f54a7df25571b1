"""The commerce platform: the event name is the ``X-Shop-Topic`` header; ``X-Shop-Webhook-Id`` is the
idempotency key, ``X-Shop-Event-Id`` groups the deliveries of one merchant action, ``X-Shop-Shop-Domain``,
``X-Shop-API-Version`` and ``X-Shop-Triggered-At`` describe the sender. The signature is
``X-Shop-Hmac-SHA256`` (``shared.signatures.sign``).

Bodies are the resource itself (order, product, customer, shop, checkout), not an envelope: numeric ids,
``gid://`` GraphQL ids, prices as decimal strings, RFC 3339 times.
"""

from __future__ import annotations

from typing import Any

from shared.samples._gen import Draft, Gen

__all__ = ("EVENT_TYPES", "draft")

EVENT_TYPES = (
    "orders/create",
    "orders/paid",
    "orders/cancelled",
    "orders/fulfilled",
    "products/create",
    "products/update",
    "customers/create",
    "app/uninstalled",
    "checkouts/create",
)

API_VERSION = "2025-10"
_SHOP = "acme-outfitters"


def _gid(kind: str, number: int) -> str:
    return f"gid://shop/{kind}/{number}"


def _customer(g: Gen) -> dict[str, Any]:
    number = g.number(13)
    return {
        "id": number,
        "email": g.email,
        "created_at": g.iso(g.days_ago()),
        "updated_at": g.iso(),
        "first_name": g.first_name,
        "last_name": g.last_name,
        "state": "enabled",
        "note": None,
        "verified_email": True,
        "tax_exempt": False,
        "phone": None,
        "currency": "USD",
        "tags": "",
        "email_marketing_consent": {"state": "not_subscribed", "opt_in_level": "single_opt_in"},
        "default_address": {"id": g.number(13), "customer_id": number, **g.address(), "default": True},
        "admin_graphql_api_id": _gid("Customer", number),
    }


def _product(g: Gen) -> dict[str, Any]:
    number, price = g.number(13), g.cents(1500, 9000)
    title = g.choice(("Classic Tee", "Canvas Tote", "Wool Beanie", "Ceramic Mug"))
    variants = [
        {
            "id": (variant := g.number(14)),
            "product_id": number,
            "title": size,
            "price": g.money(price),
            "sku": f"{title.upper().replace(' ', '-')}-{size}",
            "position": position,
            "inventory_policy": "deny",
            "compare_at_price": None,
            "option1": size,
            "taxable": True,
            "inventory_item_id": g.number(14),
            "inventory_quantity": g.rng.randrange(0, 120),
            "admin_graphql_api_id": _gid("ProductVariant", variant),
        }
        for position, size in enumerate(("S", "M", "L"), start=1)
    ]
    return {
        "id": number,
        "title": title,
        "body_html": f"<p>The {title.lower()}, made to last.</p>",
        "vendor": "Acme Outfitters",
        "product_type": "Apparel",
        "handle": title.lower().replace(" ", "-"),
        "created_at": g.iso(g.days_ago()),
        "updated_at": g.iso(),
        "published_at": g.iso(g.days_ago(1, 3)),
        "status": "active",
        "tags": "cotton, summer",
        "variants": variants,
        "options": [
            {"id": g.number(14), "product_id": number, "name": "Size", "position": 1, "values": ["S", "M", "L"]}
        ],
        "images": [],
        "admin_graphql_api_id": _gid("Product", number),
    }


def _line_items(g: Gen) -> list[dict[str, Any]]:
    product = _product(g)
    variant = product["variants"][1]
    quantity = g.rng.randrange(1, 4)
    number = g.number(14)
    return [
        {
            "id": number,
            "admin_graphql_api_id": _gid("LineItem", number),
            "product_id": product["id"],
            "variant_id": variant["id"],
            "title": product["title"],
            "variant_title": variant["title"],
            "name": f"{product['title']} - {variant['title']}",
            "sku": variant["sku"],
            "vendor": product["vendor"],
            "quantity": quantity,
            "price": variant["price"],
            "grams": 250,
            "requires_shipping": True,
            "taxable": True,
            "gift_card": False,
            "fulfillment_status": None,
            "total_discount": "0.00",
        }
    ]


def _order(event_type: str, g: Gen) -> dict[str, Any]:
    number, token = g.number(13), g.hex(32)
    items = _line_items(g)
    subtotal = sum(round(float(i["price"]) * 100) * i["quantity"] for i in items)
    tax = subtotal * 8 // 100
    order_number = g.rng.randrange(1001, 9999)
    paid = event_type in ("orders/paid", "orders/fulfilled")
    cancelled = event_type == "orders/cancelled"
    return {
        "id": number,
        "admin_graphql_api_id": _gid("Order", number),
        "name": f"#{order_number}",
        "order_number": order_number,
        "email": g.email,
        "contact_email": g.email,
        "created_at": g.iso(-600),
        "updated_at": g.iso(),
        "processed_at": g.iso(-600),
        "cancelled_at": g.iso() if cancelled else None,
        "cancel_reason": "customer" if cancelled else None,
        "currency": "USD",
        "presentment_currency": "USD",
        "financial_status": "voided" if cancelled else ("paid" if paid else "pending"),
        "fulfillment_status": "fulfilled" if event_type == "orders/fulfilled" else None,
        "subtotal_price": g.money(subtotal),
        "total_tax": g.money(tax),
        "total_discounts": "0.00",
        "total_price": g.money(subtotal + tax),
        "taxes_included": False,
        "test": True,
        "token": token,
        "browser_ip": g.ip(),
        "source_name": "web",
        "payment_gateway_names": ["manual"],
        "order_status_url": f"https://{_SHOP}.shop.example/{g.number(8)}/orders/{token}/authenticate",
        "customer": _customer(g),
        "billing_address": g.address(),
        "shipping_address": g.address(),
        "line_items": items,
        "shipping_lines": [{"id": g.number(13), "title": "Standard", "price": "5.00", "code": "STANDARD"}],
        "discount_codes": [],
        "refunds": [],
    }


def _shop(g: Gen) -> dict[str, Any]:
    return {
        "id": g.number(11),
        "name": "Acme Outfitters",
        "email": "owner@acme-outfitters.example",
        "domain": f"{_SHOP}.shop.example",
        "myshop_domain": f"{_SHOP}.shop.example",
        "shop_owner": f"{g.first_name} {g.last_name}",
        "country_code": "US",
        "currency": "USD",
        "iana_timezone": "America/New_York",
        "plan_name": "partner_test",
        "created_at": g.iso(g.days_ago()),
        "updated_at": g.iso(),
    }


def _checkout(g: Gen) -> dict[str, Any]:
    order = _order("checkouts/create", g)
    token = g.hex(32)
    return {
        "id": g.number(14),
        "token": token,
        "cart_token": g.token(26),
        "email": g.email,
        "created_at": g.iso(-120),
        "updated_at": g.iso(),
        "completed_at": None,
        "currency": "USD",
        "line_items": order["line_items"],
        "subtotal_price": order["subtotal_price"],
        "total_tax": order["total_tax"],
        "total_price": order["total_price"],
        "abandoned_checkout_url": f"https://{_SHOP}.shop.example/{g.number(8)}/checkouts/{token}/recover",
        "customer": order["customer"],
        "shipping_address": order["shipping_address"],
    }


def _body(event_type: str, g: Gen) -> dict[str, Any]:
    resource = event_type.split("/", 1)[0]
    if resource == "orders":
        return _order(event_type, g)
    if resource == "products":
        return _product(g)
    if resource == "customers":
        return _customer(g)
    if resource == "app":
        return _shop(g)
    return _checkout(g)


def draft(event_type: str, g: Gen, family: str) -> Draft:
    prefix = "x-shopify-" if family == "vendor" else "x-shop-"
    webhook_id = g.uuid()
    headers = {
        "content-type": "application/json",
        "user-agent": "Shop-Webhooks/1.0",
        f"{prefix}topic": event_type,
        f"{prefix}shop-domain": f"{_SHOP}.shop.example",
        f"{prefix}webhook-id": webhook_id,
        f"{prefix}event-id": g.uuid(),
        f"{prefix}api-version": API_VERSION,
        f"{prefix}triggered-at": g.iso(millis=True),
    }
    return Draft(headers, _body(event_type, g), webhook_id)
