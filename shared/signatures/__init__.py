"""Webhook signatures: verify every inbound scheme, and sign with the same code when replay re-signs.

Pure (no I/O) and lean: the edge calls a :func:`verifier` per request. No algorithm is ever configured; the
scheme is detected from which signature header is present, or, for a custom ``header_name``, from the
shape of its value. Headers are :data:`~shared.headers.RawHeaders` (lowercased byte names, raw byte values,
as ASGI delivers them): nothing is decoded to text to check a signature. An empty or blank header counts
as absent. With several signature headers present the first in this table wins (identity, commerce,
payments, code_host; neutral name before the real one), the order attribution uses too.

=============  ===============================================  ==========================================
scheme         signature header (neutral / real provider)       rule
=============  ===============================================  ==========================================
``identity``   ``relay-signature`` / ``webhook-signature`` /    ``v1,<base64>`` entries, space separated,
               ``svix-signature``, with the ``*-id`` and        any may match; HMAC-SHA256 over
               ``*-timestamp`` headers of the same family       ``{id}.{timestamp}.{body}``
``commerce``   ``x-shop-hmac-sha256`` / ``x-shopify-hmac-...``  base64 HMAC-SHA256 of the raw body
``payments``   ``pay-signature`` / ``stripe-signature``         ``t=<unix>,v1=<hex>[,v1=..][,v0=..]``;
                                                                HMAC-SHA256 over ``{t}.{body}``
``code_host``  ``x-codehost-signature-256`` / ``x-hub-...``     ``sha256=<hex>`` HMAC-SHA256 of the body
=============  ===============================================  ==========================================

Keys: ``identity`` decodes its key from the base64 after ``whsec_`` (the ``identity`` module says how
leniently); every other scheme uses the whole secret string as UTF-8 (for ``payments`` that includes the
``whsec_`` prefix, as the real provider does).

Verification order and failure reasons (docs/reference/signatures.md):

1. no (non-empty) signature header, or for ``identity`` no id or timestamp header: ``missing_header``;
2. the signature header does not parse (no ``v1`` entry, no ``t=``, bad base64 or hex, wrong length):
   ``malformed_header``. A ``payments`` header with only ``v0`` entries has no signature we check, so it is
   malformed too, just as an ``identity`` header without any ``v1`` entry;
3. the timestamp is not an unsigned ASCII integer: ``malformed_timestamp``;
4. no entry matches the MAC: ``signature_mismatch``;
5. ``|now - timestamp| > tolerance_s`` (both directions, exactly at the tolerance passes):
   ``timestamp_out_of_tolerance``.

The MAC is checked before the tolerance: a wrong secret then always reads ``signature_mismatch``, and
``timestamp_out_of_tolerance`` only ever describes a genuine but delayed or replayed delivery, never a
forged one with an old timestamp. The signed timestamp is the integer's decimal form, as
the reference libraries use it (``t=0017`` signs ``17``).

One module per idea: one per scheme, its check and its signature together (``identity``, ``commerce``,
``payments``, ``code_host``); ``detect`` (which scheme and header family, repeated headers); ``mac`` (the
HMAC with its keyed states cached per secret, compiled where ``shared/_native.c`` is built, and the
canonical encodings); ``check`` (one secret's check per endpoint, the compiled fast path in front);
``signing`` (sign in a scheme, re-sign a captured request); ``schemes`` (the names, families, verdicts and
reasons they all share). Callers import from here; nothing here raises on hostile headers or bodies.
"""

from __future__ import annotations

from shared.signatures.check import Check, Verifier, prover, verifier, verify
from shared.signatures.detect import detect_family, detect_scheme, repeated_header
from shared.signatures.schemes import (
    FAILURE_REASONS,
    HEADERS,
    MALFORMED_HEADER,
    MALFORMED_TIMESTAMP,
    MISSING_HEADER,
    SCHEMES,
    SIGNATURE_MISMATCH,
    TIMESTAMP_OUT_OF_TOLERANCE,
    HeaderFamily,
    Verdict,
)
from shared.signatures.signing import (
    CATALOG_SIGNATURE_HEADERS,
    own_signature_header,
    provider_signature_header,
    resign,
    sign,
)

__all__ = (
    "CATALOG_SIGNATURE_HEADERS",
    "FAILURE_REASONS",
    "HEADERS",
    "MALFORMED_HEADER",
    "MALFORMED_TIMESTAMP",
    "MISSING_HEADER",
    "SCHEMES",
    "SIGNATURE_MISMATCH",
    "TIMESTAMP_OUT_OF_TOLERANCE",
    "Check",
    "HeaderFamily",
    "Verdict",
    "Verifier",
    "detect_family",
    "detect_scheme",
    "own_signature_header",
    "prover",
    "provider_signature_header",
    "repeated_header",
    "resign",
    "sign",
    "verifier",
    "verify",
)
