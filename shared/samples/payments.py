"""The payments provider: the event name is the body's ``type`` and the body's ``id`` (``evt_``) is the
idempotency key. ``Content-Type: application/json; charset=utf-8``; the signature is
``Pay-Signature: t=<unix>,v1=<hex>`` (``shared.signatures.sign``).

Bodies are the provider's event (``object: "event"``, ``api_version``, ``created`` in Unix seconds,
``livemode``, ``pending_webhooks``, ``request``) whose ``data.object`` is the payment intent, checkout
session, subscription, invoice, charge or dispute, amounts in cents and lowercase currencies;
``*.updated`` and ``charge.refunded`` carry ``data.previous_attributes`` as the provider sends them.
"""

from __future__ import annotations

from typing import Any

from shared.samples._gen import Draft, Gen

__all__ = ("EVENT_TYPES", "draft")

EVENT_TYPES = (
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "checkout.session.completed",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "invoice.paid",
    "invoice.payment_failed",
    "charge.refunded",
    "charge.dispute.created",
)

API_VERSION = "2025-10-29"
_MONTH = 30 * 86_400


class _Ids:
    """The related objects of one event share ids: the customer of the intent is the customer of the charge."""

    def __init__(self, g: Gen) -> None:
        self.customer = g.prefixed("cus", 14)
        self.intent = g.prefixed("pi", 24)
        self.charge = g.prefixed("ch", 24)
        self.method = g.prefixed("pm", 24)
        self.subscription = g.prefixed("sub", 24)
        self.invoice = g.prefixed("in", 24)
        self.price = g.prefixed("price", 24)
        self.product = g.prefixed("prod", 14)


def _card() -> dict[str, Any]:
    return {
        "type": "card",
        "card": {
            "brand": "visa",
            "country": "US",
            "exp_month": 12,
            "exp_year": 2030,
            "funding": "credit",
            "last4": "4242",
        },
    }


def _payment_intent(g: Gen, ids: _Ids, failed: bool) -> dict[str, Any]:
    amount = g.cents()
    error = {
        "code": "card_declined",
        "decline_code": "insufficient_funds",
        "message": "Your card has insufficient funds.",
        "type": "card_error",
        "charge": ids.charge,
    }
    return {
        "id": ids.intent,
        "object": "payment_intent",
        "amount": amount,
        "amount_received": 0 if failed else amount,
        "capture_method": "automatic_async",
        "client_secret": f"{ids.intent}_secret_{g.token(25)}",
        "created": g.seconds - 5,
        "currency": "usd",
        "customer": ids.customer,
        "description": "Order #1042",
        "last_payment_error": error if failed else None,
        "latest_charge": ids.charge,
        "livemode": False,
        "metadata": {"order_id": str(g.rng.randrange(1001, 9999))},
        "payment_method": ids.method,
        "payment_method_types": ["card"],
        "receipt_email": g.email,
        "status": "requires_payment_method" if failed else "succeeded",
    }


def _checkout_session(g: Gen, ids: _Ids) -> dict[str, Any]:
    amount = g.cents()
    return {
        "id": f"cs_test_{g.token(58)}",
        "object": "checkout.session",
        "amount_subtotal": amount,
        "amount_total": amount,
        "created": g.seconds - 90,
        "currency": "usd",
        "customer": ids.customer,
        "customer_details": {"email": g.email, "name": f"{g.first_name} {g.last_name}", "tax_exempt": "none"},
        "expires_at": g.seconds + 86_400,
        "livemode": False,
        "metadata": {},
        "mode": "payment",
        "payment_intent": ids.intent,
        "payment_status": "paid",
        "status": "complete",
        "success_url": "https://acme.example/checkout/success",
        "total_details": {"amount_discount": 0, "amount_shipping": 0, "amount_tax": 0},
    }


def _subscription(g: Gen, ids: _Ids, action: str) -> dict[str, Any]:
    start = g.seconds - (_MONTH if action != "created" else 0)
    price = {
        "id": ids.price,
        "object": "price",
        "active": True,
        "currency": "usd",
        "product": ids.product,
        "recurring": {"interval": "month", "interval_count": 1, "usage_type": "licensed"},
        "type": "recurring",
        "unit_amount": 1500,
    }
    item = {"id": g.prefixed("si", 14), "object": "subscription_item", "price": price, "quantity": 1}
    return {
        "id": ids.subscription,
        "object": "subscription",
        "billing_cycle_anchor": start,
        "cancel_at_period_end": action == "updated",
        "canceled_at": g.seconds if action == "deleted" else None,
        "collection_method": "charge_automatically",
        "created": start,
        "currency": "usd",
        "current_period_start": start,
        "current_period_end": start + _MONTH,
        "customer": ids.customer,
        "default_payment_method": ids.method,
        "ended_at": g.seconds if action == "deleted" else None,
        "items": {
            "object": "list",
            "data": [{**item, "subscription": ids.subscription}],
            "has_more": False,
            "total_count": 1,
            "url": f"/v1/subscription_items?subscription={ids.subscription}",
        },
        "latest_invoice": ids.invoice,
        "livemode": False,
        "metadata": {},
        "start_date": start,
        "status": "canceled" if action == "deleted" else "active",
    }


def _invoice(g: Gen, ids: _Ids, paid: bool) -> dict[str, Any]:
    amount, start = 1500, g.seconds - 60
    line = {
        "id": g.prefixed("il", 24),
        "object": "line_item",
        "amount": amount,
        "currency": "usd",
        "description": "1 × Pro (at $15.00 / month)",
        "period": {"start": start, "end": start + _MONTH},
        "quantity": 1,
    }
    return {
        "id": ids.invoice,
        "object": "invoice",
        "amount_due": amount,
        "amount_paid": amount if paid else 0,
        "amount_remaining": 0 if paid else amount,
        "attempt_count": 1,
        "attempted": True,
        "billing_reason": "subscription_cycle",
        "created": start,
        "currency": "usd",
        "customer": ids.customer,
        "customer_email": g.email,
        "hosted_invoice_url": f"https://invoice.payments.example/i/{g.token(40)}",
        "lines": {"object": "list", "data": [line], "has_more": False, "total_count": 1},
        "livemode": False,
        "next_payment_attempt": None if paid else g.seconds + 3 * 86_400,
        "number": f"{g.token(8).upper()}-{g.rng.randrange(1, 99):04d}",
        "status": "paid" if paid else "open",
        "subscription": ids.subscription,
        "total": amount,
    }


def _charge(g: Gen, ids: _Ids) -> dict[str, Any]:
    amount = g.cents()
    return {
        "id": ids.charge,
        "object": "charge",
        "amount": amount,
        "amount_captured": amount,
        "amount_refunded": amount,
        "balance_transaction": g.prefixed("txn", 24),
        "captured": True,
        "created": g.seconds - 86_400,
        "currency": "usd",
        "customer": ids.customer,
        "disputed": False,
        "livemode": False,
        "paid": True,
        "payment_intent": ids.intent,
        "payment_method": ids.method,
        "payment_method_details": _card(),
        "refunded": True,
        "status": "succeeded",
    }


def _dispute(g: Gen, ids: _Ids) -> dict[str, Any]:
    return {
        "id": g.prefixed("dp", 24),
        "object": "dispute",
        "amount": g.cents(),
        "charge": ids.charge,
        "created": g.seconds,
        "currency": "usd",
        "evidence_details": {"due_by": g.seconds + 7 * 86_400, "has_evidence": False, "past_due": False},
        "is_charge_refundable": False,
        "livemode": False,
        "payment_intent": ids.intent,
        "reason": "fraudulent",
        "status": "needs_response",
    }


def _data(event_type: str, g: Gen) -> dict[str, Any]:
    ids = _Ids(g)
    if event_type.startswith("payment_intent."):
        return {"object": _payment_intent(g, ids, failed=event_type.endswith("failed"))}
    if event_type == "checkout.session.completed":
        return {"object": _checkout_session(g, ids)}
    if event_type.startswith("customer.subscription."):
        action = event_type.rsplit(".", 1)[1]
        data = {"object": _subscription(g, ids, action)}
        return {**data, "previous_attributes": {"cancel_at_period_end": False}} if action == "updated" else data
    if event_type.startswith("invoice."):
        return {"object": _invoice(g, ids, paid=event_type == "invoice.paid")}
    if event_type == "charge.refunded":
        return {"object": _charge(g, ids), "previous_attributes": {"amount_refunded": 0, "refunded": False}}
    return {"object": _dispute(g, ids)}


def draft(event_type: str, g: Gen, family: str) -> Draft:
    event_id = g.prefixed("evt", 24)
    body = {
        "id": event_id,
        "object": "event",
        "api_version": API_VERSION,
        "created": g.seconds,
        "data": _data(event_type, g),
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": g.prefixed("req", 14), "idempotency_key": g.uuid()},
        "type": event_type,
    }
    headers = {
        "content-type": "application/json; charset=utf-8",
        "user-agent": "Payments/1.0 (+https://payments.example/docs/webhooks)",
        "cache-control": "no-cache",
        "accept": "*/*; q=0.5, application/xml",
    }
    return Draft(headers, body, event_id)
