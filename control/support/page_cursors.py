"""Opaque keyset cursors for the newest-first lists (events, deliveries).

A cursor names the last row of a page by its sort key (timestamp, id); the next page is everything
strictly older. No offsets: rows inserted while a caller pages (always newer, at the top) neither shift
nor repeat what follows. The token is url-safe base64 of ``kind|microseconds|id`` plus a short checksum,
so a cursor from another list, a truncated one or an edited one is a 400 naming ``cursor``, not a
silently wrong page. A list of one endpoint's rows (events, deliveries) puts the endpoint in ``kind``
(``scope``): another endpoint's cursor would otherwise be taken and answer a page of the wrong rows (or
none). The checksum is not a secret: forging a position only skips within the caller's own data, which the
filters already scope.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from datetime import UTC, datetime, timedelta

from shared.errors import ValidationError

__all__ = ("decode_cursor", "decode_position", "encode_cursor", "encode_position")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CHECK = 6
_MAX_LEN = 200


def _checksum(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_CHECK, person=b"hy-cursor").digest()


def _kind(kind: str, scope: str) -> str:
    return f"{kind}@{scope}" if scope else kind


def encode_cursor(kind: str, at: datetime, row_id: str, scope: str = "") -> str:
    """The cursor after row ``row_id``; ``scope`` (an endpoint id) binds it to that endpoint's list."""
    micros = (at - _EPOCH) // timedelta(microseconds=1)
    return _seal(f"{_kind(kind, scope)}|{micros}|{row_id}".encode())


def _seal(payload: bytes) -> str:
    """The token of ``payload``: unpadded URL-safe base64 of the payload and its checksum."""
    return base64.urlsafe_b64encode(payload + _checksum(payload)).decode().rstrip("=")


def _opened(token: str, invalid: ValidationError) -> bytes:
    """The payload of a token ``_seal`` made; ``invalid`` for anything else (length, base64, checksum)."""
    if not token or len(token) > _MAX_LEN:
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise invalid from None
    payload, check = raw[:-_CHECK], raw[-_CHECK:]
    if len(raw) <= _CHECK or check != _checksum(payload):
        raise invalid
    return payload


def decode_cursor(kind: str, token: str, scope: str = "") -> tuple[datetime, str]:
    """(timestamp, id) of the row the previous page ended with; ValidationError for anything else, a cursor
    of the same list of another ``scope`` included."""
    invalid = ValidationError("cursor: not a cursor of this list; pass `next_cursor` from the previous page unchanged")
    payload = _opened(token, invalid)
    try:
        got_kind, micros, row_id = payload.decode().split("|", 2)
        at = _EPOCH + timedelta(microseconds=int(micros))
    except (UnicodeDecodeError, ValueError, OverflowError):
        raise invalid from None
    if got_kind != _kind(kind, scope) or not row_id:
        if scope and got_kind.startswith(f"{kind}@"):
            raise ValidationError(
                f"cursor: a cursor of another endpoint's list, not of {scope}'s; pass `next_cursor` from the "
                "previous page of this endpoint unchanged"
            )
        raise invalid
    return at, row_id


def encode_position(xid: int, event_id: str, *, inclusive: bool = False) -> str:
    """A place in an endpoint's events in the order they were stored (``events/wait?after=``): the storing
    transaction's id and the event id; ``event_id`` empty means before every event of that transaction.

    A position is *after* that event; an ``inclusive`` one is just before it, so following from it answers
    the event itself first: what ``test-webhook`` hands out for the sample it sent
    (``control.support.until_stored``)."""
    return _seal(f"{'at' if inclusive else 'pos'}|{xid}|{event_id}".encode())


def decode_position(token: str, *, field: str = "after") -> tuple[int, str, bool]:
    """(transaction id, event id, inclusive) of a position; ValidationError naming ``field`` for anything else."""
    invalid = ValidationError(
        f"{field}: not a position; pass `now`, or unchanged the `cursor` of a previous answer of this endpoint "
        "(events/wait, test-webhook)"
    )
    payload = _opened(token, invalid)
    try:
        kind, xid, event_id = payload.decode().split("|", 2)
        number = int(xid)
    except (UnicodeDecodeError, ValueError):
        raise invalid from None
    if kind not in ("pos", "at") or not 0 <= number < 2**63 or (kind == "at" and not event_id):
        raise invalid
    return number, event_id, kind == "at"
