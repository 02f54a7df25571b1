"""Provider attribution at ingest: which provider sent a request, its event type and idempotency key.

Pure and cheap (the edge calls it for every request). Recognised by headers, both hookyard's neutral names
and the real providers' (docs/reference/events.md; :data:`~shared.headers.RawHeaders`: lowercased byte names,
as ASGI delivers them; a value taken from a header is decoded by :func:`~shared.headers.header_text`):

=============  ==============================================  =================  ===========================
provider       recognised by                                   event_type         idempotency key
=============  ==============================================  =================  ===========================
``identity``   ``relay-signature``/``relay-id`` (also          body ``type``      ``relay-id`` / ``webhook-id``
               ``webhook-*``, ``svix-*``)                                         / ``svix-id``
``commerce``   ``x-shop-topic`` / ``x-shopify-topic``          that header        ``x-shop-webhook-id`` /
                                                                                  ``x-shopify-webhook-id``
``payments``   ``pay-signature`` / ``stripe-signature``        body ``type``      body ``id``
``code_host``  ``x-codehost-event`` / ``x-github-event``       that header        ``x-codehost-delivery`` /
                                                                                  ``x-github-delivery``
=============  ==============================================  =================  ===========================

Checked in that order; anything else is unattributed (all ``None``, the very :data:`UNATTRIBUTED` object), which is
not an error; the edge then asks the provider catalog (``shared.providers``, docs/adr/0054-provider-catalog.md). An
empty header counts as absent. The body is parsed only when the event type lives in it, and only as far as needed: a
module-level decoder of a two-field struct whose fields stay raw JSON (msgspec skips everything else), so an event
type or id that is not a non-empty string, a body that is not JSON or not an object, or one nested too deep, simply
yields ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Final

import msgspec

from shared.headers import RawHeaders, header_text

__all__ = ("PROVIDERS", "UNATTRIBUTED", "Attribution", "attribute")

PROVIDERS: Final = ("identity", "commerce", "payments", "code_host")


class Attribution(msgspec.Struct, frozen=True, gc=False):
    """A Struct, not a NamedTuple: built once per request on the edge, and a NamedTuple's ``__new__`` is
    Python code (it cost as much as the body probe)."""

    provider: str | None
    event_type: str | None
    idempotency_key: str | None


class _Probe(msgspec.Struct, gc=False):
    """The only body fields attribution reads, kept as raw JSON so any value type decodes."""

    type: msgspec.Raw = msgspec.Raw()
    id: msgspec.Raw = msgspec.Raw()


_Text = Annotated[str, msgspec.Meta(min_length=1)]


class _StringProbe(msgspec.Struct, gc=False):
    """The usual body: both fields non-empty strings (or absent), decoded in one pass with no second decode;
    anything else (an empty string too) fails validation and takes the closer look."""

    type: _Text | None = None
    id: _Text | None = None


_probe_decoder: Final = msgspec.json.Decoder(_Probe)
_string_probe_decoder: Final = msgspec.json.Decoder(_StringProbe)
_str_decoder: Final = msgspec.json.Decoder(str)
_NONE: Final = Attribution(None, None, None)
UNATTRIBUTED: Final = _NONE
"""What :data:`attribute` returns, this very object, for a request of none of the four kinds (``is`` tests it)."""
_QUOTE: Final = ord('"')

_IDENTITY_IDS: Final = (b"relay-id", b"webhook-id", b"svix-id")
_IDENTITY_SIGNATURES: Final = (b"relay-signature", b"webhook-signature", b"svix-signature")
# (topic or event header, its delivery-id header): neutral name first, then the real provider's.
_COMMERCE: Final = ((b"x-shop-topic", b"x-shop-webhook-id"), (b"x-shopify-topic", b"x-shopify-webhook-id"))
_COMMERCE_IDS: Final = tuple(id_name for _, id_name in _COMMERCE)
_PAYMENTS: Final = (b"pay-signature", b"stripe-signature")
_CODE_HOST: Final = ((b"x-codehost-event", b"x-codehost-delivery"), (b"x-github-event", b"x-github-delivery"))
_CODE_HOST_IDS: Final = tuple(id_name for _, id_name in _CODE_HOST)
# Per provider, every header name that can attribute to it: one C-level ``isdisjoint`` over the request's
# headers rules a provider out, instead of a Python-level lookup per name (the edge runs this per request).
_IDENTITY_ANY: Final = frozenset(_IDENTITY_IDS + _IDENTITY_SIGNATURES)
_COMMERCE_ANY: Final = frozenset(topic for topic, _ in _COMMERCE)
_PAYMENTS_ANY: Final = frozenset(_PAYMENTS)
_CODE_HOST_ANY: Final = frozenset(event for event, _ in _CODE_HOST)


def _fields(body: bytes) -> tuple[str | None, str | None] | None:
    """(type, id) of a JSON object body, each a non-empty string or None; None when not a JSON object."""
    try:
        usual = _string_probe_decoder.decode(body)
        return usual.type, usual.id
    except msgspec.ValidationError:  # a field of another JSON type (or not an object): look closer
        pass
    except (msgspec.DecodeError, RecursionError):
        return None
    try:
        probe = _probe_decoder.decode(body)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    return _string(probe.type), _string(probe.id)


def _string(raw: msgspec.Raw) -> str | None:
    """A raw JSON value as a non-empty string; ``None`` for any other JSON type."""
    if not raw or memoryview(raw)[0] != _QUOTE:
        return None
    try:
        return _str_decoder.decode(raw) or None
    except msgspec.DecodeError:
        return None


def _first(headers: RawHeaders, names: tuple[bytes, ...]) -> bytes | None:
    for name in names:
        value = headers.get(name)
        if value:
            return value
    return None


def _text(value: bytes | None) -> str | None:
    return None if not value else header_text(value)


def _attribute(headers: RawHeaders, body: bytes) -> Attribution:
    """Provider, event type and idempotency key of a request; all ``None`` when unattributed.

    The definition of attribution; :data:`attribute` puts the compiled fast path in front of it."""
    if not _IDENTITY_ANY.isdisjoint(headers):
        key = _first(headers, _IDENTITY_IDS)
        if key is not None or _first(headers, _IDENTITY_SIGNATURES) is not None:
            fields = _fields(body)
            return Attribution("identity", None if fields is None else fields[0], _text(key))
    if not _COMMERCE_ANY.isdisjoint(headers):
        for topic_name, id_name in _COMMERCE:
            topic = headers.get(topic_name)
            if topic:
                key = headers.get(id_name) or _first(headers, _COMMERCE_IDS)
                return Attribution("commerce", header_text(topic), _text(key))
    if not _PAYMENTS_ANY.isdisjoint(headers) and (headers.get(_PAYMENTS[0]) or headers.get(_PAYMENTS[1])):
        fields = _fields(body)
        if fields is None:
            return Attribution("payments", None, None)
        return Attribution("payments", fields[0], fields[1])
    if not _CODE_HOST_ANY.isdisjoint(headers):
        for event_name, id_name in _CODE_HOST:
            event = headers.get(event_name)
            if event:
                key = headers.get(id_name) or _first(headers, _CODE_HOST_IDS)
                return Attribution("code_host", header_text(event), _text(key))
    return _NONE


try:
    # The edge attributes every request: where shared/_native.c is built, the usual request (a dict of bytes
    # headers, a body the string probe decodes) is attributed in C, from the header names above, and anything
    # else by _attribute (the tests run both and compare them).
    from shared import _native
except ImportError:
    _native = None  # type: ignore[assignment]  # optional: mypy cannot type a module that may be None


Attribute = Callable[[RawHeaders, bytes], Attribution]


def _compiled(fallback: Attribute) -> Attribute:
    """The compiled attribution over the header names above, asking ``fallback`` whenever it cannot answer."""
    return _native.Attributor(
        fallback=fallback,
        make=Attribution,
        probe=_string_probe_decoder.decode,
        none=_NONE,
        identity_ids=_IDENTITY_IDS,
        identity_signatures=_IDENTITY_SIGNATURES,
        commerce=_COMMERCE,
        commerce_ids=_COMMERCE_IDS,
        payments=_PAYMENTS,
        code_host=_CODE_HOST,
        code_host_ids=_CODE_HOST_IDS,
    )


attribute: Attribute = _attribute if _native is None else _compiled(_attribute)
"""Provider, event type and idempotency key of a request; all ``None`` when unattributed."""
