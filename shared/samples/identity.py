"""The relay-delivered identity provider: the event name is the body's ``type``; the relay adds
``relay-id`` (the delivery id, stable across retries), ``relay-timestamp`` and ``relay-signature``.

Bodies are the provider's event envelope (``data``, ``object: "event"``, ``type``, a millisecond
``timestamp``, ``event_attributes``) around a user, session, organization, membership, invitation or email
object, timestamps in Unix milliseconds as the provider writes them.
"""

from __future__ import annotations

from typing import Any

from shared.samples._gen import Draft, Gen

__all__ = ("EVENT_TYPES", "draft")

EVENT_TYPES = (
    "user.created",
    "user.updated",
    "user.deleted",
    "session.created",
    "session.ended",
    "session.revoked",
    "organization.created",
    "organizationMembership.created",
    "organizationInvitation.accepted",
    "email.created",
)

_DAY_MS = 86_400_000


def _user(g: Gen, user_id: str) -> dict[str, Any]:
    email_id = g.prefixed("idn", 27)
    created = g.millis - 30 * _DAY_MS
    return {
        "backup_code_enabled": False,
        "banned": False,
        "created_at": created,
        "email_addresses": [
            {
                "email_address": g.email,
                "id": email_id,
                "linked_to": [],
                "object": "email_address",
                "verification": {"attempts": 1, "expire_at": None, "status": "verified", "strategy": "email_code"},
            }
        ],
        "external_accounts": [],
        "external_id": None,
        "first_name": g.first_name,
        "has_image": False,
        "id": user_id,
        "image_url": f"https://img.identity.example/{g.token(32)}",
        "last_active_at": g.millis,
        "last_name": g.last_name,
        "last_sign_in_at": g.millis - 60_000,
        "locked": False,
        "object": "user",
        "password_enabled": True,
        "phone_numbers": [],
        "primary_email_address_id": email_id,
        "primary_phone_number_id": None,
        "private_metadata": {},
        "public_metadata": {"plan": "pro"},
        "two_factor_enabled": False,
        "unsafe_metadata": {},
        "updated_at": g.millis,
        "username": f"{g.first_name}{g.number(3)}".lower(),
        "web3_wallets": [],
    }


def _session(g: Gen, user_id: str, status: str) -> dict[str, Any]:
    return {
        "abandon_at": g.millis + 30 * _DAY_MS,
        "actor": None,
        "client_id": g.prefixed("client", 27),
        "created_at": g.millis - 3_600_000,
        "expire_at": g.millis + 7 * _DAY_MS,
        "id": g.prefixed("sess", 27),
        "last_active_at": g.millis,
        "last_active_organization_id": None,
        "object": "session",
        "status": status,
        "updated_at": g.millis,
        "user_id": user_id,
    }


def _organization(g: Gen, user_id: str) -> dict[str, Any]:
    name = g.choice(("Acme Inc", "Globex", "Initech", "Umbrella Labs"))
    return {
        "created_at": g.millis,
        "created_by": user_id,
        "id": g.prefixed("org", 27),
        "image_url": f"https://img.identity.example/{g.token(32)}",
        "max_allowed_memberships": 5,
        "members_count": 1,
        "name": name,
        "object": "organization",
        "private_metadata": {},
        "public_metadata": {},
        "slug": name.lower().replace(" ", "-"),
        "updated_at": g.millis,
    }


def _data(event_type: str, g: Gen) -> dict[str, Any]:
    user_id = g.prefixed("user", 27)
    kind, _, action = event_type.partition(".")
    if event_type == "user.deleted":
        return {"deleted": True, "id": user_id, "object": "user"}
    if kind == "user":
        return _user(g, user_id)
    if kind == "session":
        return _session(g, user_id, {"created": "active"}.get(action, action))
    if kind == "organization":
        return _organization(g, user_id)
    if kind == "organizationMembership":
        return {
            "created_at": g.millis,
            "id": g.prefixed("orgmem", 27),
            "object": "organization_membership",
            "organization": _organization(g, user_id),
            "permissions": ["org:sys_profile:read", "org:sys_memberships:read"],
            "public_metadata": {},
            "public_user_data": {
                "first_name": g.first_name,
                "last_name": g.last_name,
                "identifier": g.email,
                "has_image": False,
                "user_id": user_id,
            },
            "role": "org:member",
            "updated_at": g.millis,
        }
    if kind == "organizationInvitation":
        return {
            "created_at": g.millis - 86_400_000,
            "email_address": g.email,
            "id": g.prefixed("orginv", 27),
            "object": "organization_invitation",
            "organization_id": g.prefixed("org", 27),
            "public_metadata": {},
            "role": "org:member",
            "status": "accepted",
            "updated_at": g.millis,
        }
    code = f"{g.number(6)}"
    return {  # email.created
        "body": f"Your verification code is {code}. It expires in 10 minutes.",
        "data": {"app": {"name": "Acme", "url": "https://acme.example"}, "otp_code": code},
        "delivered_by_provider": True,
        "email_address_id": g.prefixed("idn", 27),
        "from_email_name": "notifications",
        "id": g.prefixed("ema", 27),
        "object": "email",
        "slug": "verification_code",
        "status": "queued",
        "subject": f"{code} is your verification code",
        "to_email_address": g.email,
        "user_id": user_id,
    }


def body(event_type: str, g: Gen) -> dict[str, Any]:
    return {
        "data": _data(event_type, g),
        "event_attributes": {
            "http_request": {"client_ip": g.ip(), "user_agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5)"}
        },
        "instance_id": g.prefixed("ins", 27),
        "object": "event",
        "timestamp": g.millis,
        "type": event_type,
    }


def draft(event_type: str, g: Gen, family: str) -> Draft:
    """The relay's headers beyond the signature trio, which ``shared.signatures.sign`` writes from the
    delivery id chosen here (``msg_``, the idempotency key)."""
    headers = {"content-type": "application/json", "user-agent": "Relay-Webhooks/1.0 (+https://relay.example)"}
    return Draft(headers, body(event_type, g), g.prefixed("msg", 27))
