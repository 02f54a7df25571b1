"""The kinds of caller text the request records take, each with the exact rule the server applies.

Every pattern here is read two ways: by msgspec with Python's ``re`` (``re.search``) when a request is
decoded, and as ECMA 262 by readers of the OpenAPI document (schemathesis among them). So they use ASCII
classes only (``\\s`` and ``\\w`` differ between the two for non-ASCII characters) and avoid what differs
(Python's ``$`` also matches before a trailing newline; where that matters the service checks again).

NUL and lone surrogates are refused by the service layer (``control.records.storable.check_text``) with a
message that names the field; the OpenAPI document states the NUL rule in its patterns (``doc_pattern``),
which msgspec does not check (``extra_json_schema`` is documentation to msgspec), so the message stays
precise.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from control.records.storable import NUL_PROBLEM

__all__ = (
    "EMAIL",
    "NO_NUL",
    "PATTERN_RULES",
    "REF",
    "SECRET",
    "SECRET_FIELD",
    "TEMPORARY_TOKEN",
    "VISIBLE",
    "DocumentedAs",
    "ExternalRef",
    "Name",
    "id_pattern",
    "meaning",
    "text",
)

NO_NUL = r"^[^\x00]*$"
VISIBLE = r"[^\x00-\x20\x7f]"
"""Somewhere a character that is neither a space nor a control character."""
NAME = r"^[^\x00]*[^\x00-\x20\x7f][^\x00]*$"
"""VISIBLE and no NUL: what the server accepts as a name, as the OpenAPI document states it."""
REF = r"^[^\x00-\x20\x7f](?:[^\x00-\x1f\x7f]*[^\x00-\x20\x7f])?$"
"""No control characters (NUL included), and no space at either end."""
SECRET = r"^[^\x00-\x20\x7f](?:[^\x00]*[^\x00-\x20\x7f])?$"
"""No NUL, and neither whitespace nor a control character at either end (a pasted newline)."""
EMAIL = (
    r"^[^\x00-\x20\x7f@\"(),:;<>\[\\\]]+"
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"
)
"""An address as registration takes it: a local part without spaces, control characters or the specials that
would need quoting, then a host name with at least one dot (internationalised domains in their ``xn--``
form). Checked again in full by the service (Python's ``$`` would also take a trailing newline)."""
TEMPORARY_TOKEN = r"^hy_tmp_[0-9A-Za-z]{32}$"
SECRET_FIELD: dict[str, Any] = {"writeOnly": True}
"""The one mark of a field that takes a secret (a password, a token, a signing secret, a private key): the
OpenAPI document's ``writeOnly`` (never returned), and what a 400 consults (``control.support.body_messages``)
to show only such a value's kind and length, never the value. ``text(..., **SECRET_FIELD)`` or
``msgspec.Meta(extra_json_schema=SECRET_FIELD)``; tests/unit/test_secret_fields.py finds unmarked ones."""


PATTERN_RULES: dict[str, str] = {
    NO_NUL: NUL_PROBLEM,
    VISIBLE: "must contain a visible character (not only spaces or control characters)",
    EMAIL: "must be an e-mail address: a local part, @, and a host name with a dot (you@example.com)",
    TEMPORARY_TOKEN: "must be the `api_token` of /api/start: hy_tmp_ and 32 letters or digits",
}
"""What a pattern means, for the 400 message when msgspec reports a value that does not match it (a regex is
no message: errors.md). A pattern defined elsewhere says its meaning where it is defined (``meaning``);
tests/unit/test_pattern_rules.py checks every pattern of every request record has one."""


def meaning(pattern: str, rule: str) -> str:
    """``pattern``, its ``rule`` (``must be ...``) recorded in ``PATTERN_RULES`` for the 400 that reports a value
    not matching it: written beside the pattern, so a new one comes with its words."""
    PATTERN_RULES.setdefault(pattern, rule)
    return pattern


def id_pattern(prefix: str) -> str:
    """The shape of an id of this kind (``shared.ids``): ``ep_`` and a ULID. Any other string names nothing,
    so an id of another shape is a 404 like an unknown one."""
    return meaning(
        rf"^{prefix}_[0-7][0-9A-HJKMNP-TV-Z]{{25}}$",
        f"must be an id of this kind: {prefix}_ and a ULID (26 characters)",
    )


def text(
    *,
    max_length: int,
    min_length: int = 1,
    pattern: str | None = None,
    doc_pattern: str | None = NO_NUL,
    description: str | None = None,
    **schema: Any,
) -> msgspec.Meta:
    """The constraints of one kind of text. ``pattern`` is checked by msgspec on decode; ``doc_pattern`` is
    what the document states, the whole rule the server applies (the service checks the rest, NUL at least,
    with a message that names the problem). ``schema`` adds JSON Schema keywords (``format``...)."""
    extra = schema if doc_pattern is None else {**schema, "pattern": doc_pattern}
    return msgspec.Meta(
        min_length=min_length,
        max_length=max_length,
        pattern=pattern,
        description=description,
        extra_json_schema=extra,
    )


Name = Annotated[
    str,
    text(
        max_length=200,
        pattern=VISIBLE,
        doc_pattern=NAME,
        description="A display name, shown in lists, the inbox and alerts (up to 200 characters, one visible)",
    ),
]
"""A display name: up to 200 characters with a visible one among them; no NUL."""
ExternalRef = Annotated[
    str,
    text(
        max_length=200,
        doc_pattern=REF,
        description="Caller-chosen stable name, unique per account; no control characters, no edge spaces",
    ),
]


class DocumentedAs:
    """``Annotated`` metadata: the OpenAPI document describes the field as ``annotation`` while the server
    decodes it as it is typed (e.g. ``Any``, checked by the service with messages that name the node).
    msgspec ignores metadata it does not know; ``control.api.openapi`` reads this."""

    __slots__ = ("annotation",)

    def __init__(self, annotation: Any) -> None:
        self.annotation = annotation
