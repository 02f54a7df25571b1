"""Every error hookyard raises on purpose, in one tree. No HTTP in here: the transports map these once.

Our exception hierarchy:

* HookyardError
  x ConfigError                - a bad setting at start; the process exits naming the variable (exit 2)
  x MigrationError             - an applied migration was edited since, or a file failed to apply
  x EmbeddedError              - ``hookyard up``'s embedded Postgres or Redis did not start; an unusable data dir
  x StartupError               - a child of ``hookyard up`` died or never became healthy
  x EgressRefusedError         - a destination resolves to an address the egress policy forbids (permanent)
  x ConfigsIncompleteError     - Redis lost the edge configs and the sweep has not rebuilt them: worth retrying
  x ApiError                   - the control plane refused a command's call (its envelope's code and message)
  x Unreachable                - the control plane did not answer, or answered 502-504: worth retrying
  x JobDataError               - a background job cannot go on for what is stored (retrying fails the same way)
  x ServiceError               - a caller's request cannot be served; carries a stable snake_case ``code``
    + ValidationError          - validation_error (the message names the field)
      - InvalidConditionTree   - invalid_condition_tree (the message names the node)
    + UnauthorizedError        - unauthorized
    + ForbiddenError           - forbidden / temporary_token
    + NotFoundError            - not_found (also: another account's id)
    + GoneError                - endpoint_expired (a temporary endpoint past its expiry)
    + ConflictError            - external_ref_taken, ...
    + RateLimitedError         - rate_limited (``retry_after_s``)
    + PayloadTooLargeError     - payload_too_large

The HTTP status of a ``ServiceError`` is the surface's to say, by class: ``control.api.errors.STATUSES``
for /v1 and the control plane's pages (MCP carries the code alone, in a tool error). The edge answers its
few errors itself, status and code at the call (``edge.respond.send_error``), and raises none of these.
Exceptions that never leave their module (``_TooLarge`` in ``edge.ingest``...) are signals, not errors,
and stay out of the tree.
"""

from __future__ import annotations

import msgspec

__all__ = (
    "ApiError",
    "ConfigError",
    "ConfigsIncompleteError",
    "ConflictError",
    "EgressRefusedError",
    "EmbeddedError",
    "ErrorBody",
    "ErrorEnvelope",
    "ForbiddenError",
    "GoneError",
    "HookyardError",
    "InvalidConditionTree",
    "JobDataError",
    "MigrationError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ServiceError",
    "StartupError",
    "UnauthorizedError",
    "Unreachable",
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


class MigrationError(HookyardError):
    """An applied migration no longer matches its file, or a file failed to apply."""


class EmbeddedError(HookyardError):
    """An embedded server could not be started or the data dir cannot be used."""


class StartupError(HookyardError):
    """A child process died or never became healthy while ``hookyard up`` was starting."""


class EgressRefusedError(HookyardError):
    """The destination resolves to an address the egress policy forbids; a permanent failure."""


class ConfigsIncompleteError(HookyardError):
    """An edge found no config for a token while Redis holds no complete set of them (it lost its data, and
    the sweep is rebuilding them from Postgres): the token may well be known, so the sender is told to retry
    (503), not that the endpoint does not exist (404), which some providers never retry."""


class ApiError(HookyardError):
    """The control plane answered a command's call with an error: ``code`` is its envelope's. ``rate_limited``
    tells the refusals worth waiting out (``listen`` and ``tail`` do) from the ones to report."""

    def __init__(self, message: str, *, code: str, rate_limited: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.rate_limited = rate_limited


class Unreachable(HookyardError):
    """The control plane did not answer (down, restarting) or answered 502-504: worth retrying."""


class JobDataError(HookyardError):
    """A job's step cannot go on because of what is stored (the job's field or value, an event row, a
    schema's state), not because a store is away: trying again fails the same way, so after a few tries the
    job is ``failed`` naming why (erasure jobs), where an outage is waited out."""


class ServiceError(HookyardError):
    """A request that cannot be served; ``code`` and the message are the public contract, and the class
    decides the status a transport answers with."""

    code: str = "bad_request"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ValidationError(ServiceError):
    code = "validation_error"


class InvalidConditionTree(ValidationError):
    """A condition tree that cannot be compiled; the message starts with the path of the offending node or
    key, e.g. ``condition_tree.children[1].operator: unknown operator "gt"``."""

    code = "invalid_condition_tree"


class UnauthorizedError(ServiceError):
    code = "unauthorized"


class ForbiddenError(ServiceError):
    code = "forbidden"


class NotFoundError(ServiceError):
    code = "not_found"


class GoneError(ServiceError):
    """The object existed and is not coming back: a temporary endpoint past its ``expires_at``, whose data
    only waits for the sweep."""

    code = "gone"


class ConflictError(ServiceError):
    code = "conflict"


class PayloadTooLargeError(ServiceError):
    code = "payload_too_large"


class RateLimitedError(ServiceError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
