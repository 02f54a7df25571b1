"""Types of the compiled extension built from ``shared/_native.c`` (mypy cannot read C): the same interfaces
as the Python fallbacks ``signatures.mac.PyHmac``, ``signatures.check.Verifier`` and ``attribution._attribute``."""

from collections.abc import Callable, Mapping

from shared.attribution import Attribution
from shared.signatures.check import Check
from shared.signatures.schemes import Verdict

class Mac:
    def __init__(self, key: bytes) -> None: ...
    def __call__(self, prefix: bytes, body: bytes, /) -> bytes: ...

class Verifier:
    def __init__(
        self,
        table: tuple[object, ...],
        plain: Callable[[bytes, bytes], bytes],
        identity: Callable[[bytes, bytes], bytes],
        tolerance_s: float,
        fallback: Check,
    ) -> None: ...
    def __call__(self, headers: Mapping[bytes, bytes], body: bytes, now: float | None, /) -> Verdict: ...

class Attributor:
    def __init__(
        self,
        *,
        fallback: Callable[[Mapping[bytes, bytes], bytes], Attribution],
        make: type[Attribution],
        probe: Callable[[bytes], object],
        none: Attribution,
        identity_ids: tuple[bytes, ...],
        identity_signatures: tuple[bytes, ...],
        commerce: tuple[tuple[bytes, bytes], ...],
        commerce_ids: tuple[bytes, ...],
        payments: tuple[bytes, ...],
        code_host: tuple[tuple[bytes, bytes], ...],
        code_host_ids: tuple[bytes, ...],
    ) -> None: ...
    def __call__(self, headers: Mapping[bytes, bytes], body: bytes, /) -> Attribution: ...
