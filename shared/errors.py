"""Every error hookyard raises on purpose, in one tree. No HTTP in here: the transports map these once.

Our exception hierarchy:

* HookyardError
  x ConfigError                - a bad setting at start; the process exits naming the variable (exit 2)
  x MigrationError             - an applied migration was edited since, or a file failed to apply
  x EmbeddedError              - ``hookyard up``'s embedded Postgres or Redis did not start; an unusable data dir
  x StartupError               - a child of ``hookyard up`` died or never became healthy
  x EgressRefusedError         - a destination resolves to an address the egress policy forbids (permanent)
  x TokenFetchError            - a destination's OAuth2 token endpoint failed or was refused (``permanent``)
  x NotATransformError         - a transform's source does not compile (V8's message and the line it names)
  x SandboxEndedError          - a transform's sandbox process ended (killed for time or died) under a batch
  x ConfigsIncompleteError     - Redis lost the edge configs and the sweep has not rebuilt them: worth retrying
  x ApiError                   - the control plane refused a command's call (its envelope's code and message)
  x Unreachable                - the control plane did not answer, or answered 502-504: worth retrying
  x JobDataError               - a background job cannot go on for what is stored (retrying fails the same way)
  x ServiceError               - a caller's request cannot be served; carries a stable snake_case ``code``
    + ValidationError          - validation_error (the message names the field)
      - InvalidConditionTree   - invalid_condition_tree (the message names the node)
    + UnauthorizedError        - unauthorized
    + ForbiddenError           - forbidden / temporary_token
      - QuotaExceededError     - quota_exceeded (an account at its endpoints or alert destinations quota)
    + NotFoundError            - not_found (also: another account's id)
    + GoneError                - endpoint_expired (a temporary endpoint past its expiry)
    + ConflictError            - external_ref_taken, ...
    + RateLimitedError         - rate_limited (``retry_after_s``)
    + PayloadTooLargeError     - payload_too_large
    + UnsupportedEncodingError - unsupported_content_encoding (a request body compressed: control takes none)

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
    "NotATransformError",
    "NotFoundError",
    "PayloadTooLargeError",
    "QuotaExceededError",
    "RateLimitedError",
    "SandboxEndedError",
    "ServiceError",
    "StartupError",
    "TokenFetchError",
    "UnauthorizedError",
    "Unreachable",
    "UnsupportedEncodingError",
    "ValidationError",
    "body_too_large",
    "envelope",
)


class ErrorBody(msgspec.Struct, frozen=True):
    code: str
    message: str


class ErrorEnvelope(msgspec.Struct, frozen=True):
    """Every non-2xx body from edge and control: ``{"error": {"code", "message"}}``."""

    error: ErrorBody


def body_too_large(limit: int | None) -> str:
    """The 413 ``payload_too_large`` message, one wording for /v1 and /mcp (whose limits are the same)."""
    return "body: request body is too large" + (f" (at most {limit:,} bytes)" if limit else "")


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


class TokenFetchError(HookyardError):
    """No OAuth2 token for a destination: its token endpoint failed, or the egress policy refused it
    (``permanent``: fetching again cannot help until the destination changes)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class NotATransformError(HookyardError):
    """A transform's source does not compile: V8's ``message`` and the ``line`` it names. The services word
    it as the error of the field it came in (``transform: line 3: ...``) or as a dry run's answer."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class SandboxEndedError(HookyardError):
    """A transform's sandbox process is gone: killed for time, or died (``crashed``). ``innocent``: the batch
    never started (it waited behind the one that ended the process), and the pool sends it again."""

    def __init__(self, message: str, *, crashed: bool, innocent: bool = False) -> None:
        super().__init__(message)
        self.message, self.crashed, self.innocent = message, crashed, innocent


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

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.where = where
        """How the message names the control plane (its URL and where that came from), to name it again once
        that has changed."""


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


class QuotaExceededError(ForbiddenError):
    """An account at one of its quotas (endpoints, alert destinations): a 403 whose code says which kind of
    refusal it is, so a client tells it from a missing permission."""

    code = "quota_exceeded"


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


class UnsupportedEncodingError(ServiceError):
    """A request body in a content coding the control plane does not undo (``Content-Encoding: gzip``)."""

    code = "unsupported_content_encoding"


class RateLimitedError(ServiceError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
