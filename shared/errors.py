"""The service's error tree. No HTTP in here: each transport maps these once.

```
* HookyardError
  x ConfigError              - a bad setting at start; the process exits naming the variable
  x ServiceError             - a caller's request cannot be served; carries a stable snake_case code
    + ValidationError        - 400 validation_error (message names the field)
    + UnauthorizedError      - 401 unauthorized
    + ForbiddenError         - 403 forbidden / temporary_token
    + NotFoundError          - 404 not_found (also: another account's id)
    + GoneError              - 410 endpoint_expired (a temporary endpoint past its expiry)
    + ConflictError          - 409 external_ref_taken, ...
    + RateLimitedError       - 429 rate_limited (retry_after_s)
    + PayloadTooLargeError   - 413 payload_too_large
```
"""

from __future__ import annotations

import msgspec

__all__ = (
    "ConfigError",
    "ConflictError",
    "ErrorBody",
    "ErrorEnvelope",
    "ForbiddenError",
    "GoneError",
    "HookyardError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ServiceError",
    "UnauthorizedError",
    "ValidationError",
    "envelope",
)


class ErrorBody(msgspec.Struct, frozen=True):
    code: str
    message: str


class ErrorEnvelope(msgspec.Struct, frozen=True):
    """Every non-2xx body from edge and control: ``{"error": {"code", "message"}}``."""

    error: ErrorBody


def envelope(code: str, message: str) -> ErrorEnvelope:
    return ErrorEnvelope(error=ErrorBody(code=code, message=message))


class HookyardError(Exception):
    """Root of every error hookyard raises on purpose."""


class ConfigError(HookyardError):
    """A setting is missing or malformed; raised before anything starts serving."""


class ServiceError(HookyardError):
    """A request that cannot be served; ``status`` and ``code`` are the public contract."""

    status: int = 400
    code: str = "bad_request"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ValidationError(ServiceError):
    status = 400
    code = "validation_error"


class UnauthorizedError(ServiceError):
    status = 401
    code = "unauthorized"


class ForbiddenError(ServiceError):
    status = 403
    code = "forbidden"


class NotFoundError(ServiceError):
    status = 404
    code = "not_found"


class GoneError(ServiceError):
    """The object existed and is not coming back: a temporary endpoint past its ``expires_at``, whose data
    only waits for the sweep."""

    status = 410
    code = "gone"


class ConflictError(ServiceError):
    status = 409
    code = "conflict"


class PayloadTooLargeError(ServiceError):
    status = 413
    code = "payload_too_large"


class RateLimitedError(ServiceError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
