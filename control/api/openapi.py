"""OpenAPI helpers: every route documents its error statuses with the envelope they carry."""

from __future__ import annotations

from litestar.openapi import ResponseSpec

from shared.errors import ErrorEnvelope

__all__ = ("errors",)

_DESCRIPTIONS = {
    400: "Invalid request: `validation_error` (the message names the field), `invalid_condition_tree`",
    401: "Missing or invalid API key: `unauthorized`",
    403: "`temporary_token` on /v1, a read-only key writing, or the account's endpoint quota reached: `forbidden`",
    404: "Unknown id, or an id of another account: `not_found`",
    409: "Conflict, e.g. `external_ref_taken`",
    413: "Body too large: `payload_too_large`",
    429: "Rate limited: `rate_limited`, with `Retry-After`",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    # 400 is always documented: Litestar adds its own 400 (with its non-envelope body schema) to every route
    # with parameters or a body, and only a 400 given here replaces it with the envelope that is really sent.
    return {
        s: ResponseSpec(data_container=ErrorEnvelope, description=_DESCRIPTIONS[s], generate_examples=False)
        for s in sorted({400, *statuses})
    }
