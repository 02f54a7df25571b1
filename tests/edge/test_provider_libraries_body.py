"""Providers that sign inside the body, proven with their own PyPI libraries: Mailgun (``mailgun``: HMAC of
the body's timestamp and token), Adyen (``Adyen``: HMAC over eight notification fields, the signature in
``additionalData``) and Braintree (``braintree``: its own sample notification, ``bt_signature`` over
``bt_payload``). The library signs (or checks what the catalog signs), the in-process edge stores the request
verified and refuses a copy whose signed part changed."""

from __future__ import annotations

import copy
import json
import time
import warnings
from urllib.parse import parse_qsl, urlencode

import msgspec

from shared.providers import CATALOG
from shared.providers.sign import sign_body
from tests.edge.test_provider_libraries import endpoint, proves
from tests.helpers import redis_connection  # noqa: F401 - the `redis` fixture

JSON = {"content-type": "application/json"}


async def test_mailgun_verifies_the_timestamp_and_token_signature(edge_client, redis, edge_settings) -> None:
    from mailgun.security import SecurityGuard

    key = "key-7e55c3c1b0f0d4ea6f8c2b6a1e3d9f00"
    token = await endpoint(redis, edge_settings, key, provider="mailgun")
    sample = {
        "signature": {"timestamp": "0", "token": "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0", "signature": ""},
        "event-data": {"event": "delivered", "id": "CPgfbmQMTCKtHW6uIWtuVe", "recipient": "alice@example.com"},
    }
    body = sign_body(CATALOG["mailgun"], msgspec.json.encode(sample), key)
    signed = json.loads(body)["signature"]
    assert SecurityGuard.verify_webhook(key, signed["token"], signed["timestamp"], signed["signature"])
    forged = {**signed, "token": signed["token"][:-1] + "1"}
    assert not SecurityGuard.verify_webhook(key, forged["token"], forged["timestamp"], forged["signature"])
    tampered = msgspec.json.encode({**json.loads(body), "signature": forged})
    await proves(edge_client, redis, edge_settings, token, "mailgun", body, JSON, tampered)


async def test_adyen_signs_the_notification_item(edge_client, redis, edge_settings) -> None:
    from Adyen.util import generate_notification_sig, is_valid_hmac_notification

    key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
    token = await endpoint(redis, edge_settings, key, provider="adyen")
    item = {
        "amount": {"currency": "EUR", "value": 1130},
        "eventCode": "AUTHORISATION",
        "eventDate": "2024-01-01T01:00:00+01:00",
        "merchantAccountCode": "TestMerchant",
        "merchantReference": "order-7",
        "paymentMethod": "visa",
        "pspReference": "7914073381342284",
        "reason": "",
        "success": "true",
    }
    signed = {**item, "additionalData": {"hmacSignature": generate_notification_sig(item, key).decode()}}
    notification = {"live": "false", "notificationItems": [{"NotificationRequestItem": signed}]}
    body = json.dumps(notification).encode()
    assert is_valid_hmac_notification(notification, key)
    changed = copy.deepcopy(notification)
    changed["notificationItems"][0]["NotificationRequestItem"]["amount"]["value"] = 113000
    assert not is_valid_hmac_notification(changed, key)
    await proves(edge_client, redis, edge_settings, token, "adyen", body, JSON, json.dumps(changed).encode())


async def test_braintree_sample_notification_verifies(edge_client, redis, edge_settings) -> None:
    with warnings.catch_warnings():  # braintree warns at import about its own deprecated enum
        warnings.simplefilter("ignore", DeprecationWarning)
        import braintree

    gateway = braintree.BraintreeGateway(
        braintree.Configuration(
            braintree.Environment.Sandbox, merchant_id="m", public_key="pub_key", private_key="priv_key_2f9c8e"
        )
    )
    token = await endpoint(redis, edge_settings, "priv_key_2f9c8e", provider="braintree")
    made = gateway.webhook_testing.sample_notification(braintree.WebhookNotification.Kind.Check, "")
    sample = {name: value.decode() if isinstance(value, bytes) else value for name, value in made.items()}
    assert gateway.webhook_notification.parse(sample["bt_signature"], sample["bt_payload"]).kind == "check"
    body = urlencode(sample).encode()
    headers = {"content-type": "application/x-www-form-urlencoded"}
    payload = sample["bt_payload"].replace("\n", "")
    tampered = urlencode({**sample, "bt_payload": payload[:-4] + ("AAAA" if payload[-4:] != "AAAA" else "BBBB")})
    await proves(edge_client, redis, edge_settings, token, "braintree", body, headers, tampered.encode())
    # and the catalog's own signer agrees with the library
    ours = dict(
        parse_qsl(sign_body(CATALOG["braintree"], body, "priv_key_2f9c8e", form=True, now=time.time()).decode())
    )
    assert ours["bt_signature"].split("|")[1] == sample["bt_signature"].split("|")[1]
