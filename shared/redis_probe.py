"""redis-py without its OpenTelemetry SDK probe at import.

``import redis`` imports ``redis.observability.providers``, which tries ``opentelemetry.sdk.metrics`` at once to
learn whether redis-py's own OTel metrics could be turned on: with the SDK installed (hookyard depends on it
for its traces, shared.tracing) that import is the SDK's metrics, its resources and psutil, about a fifth of
the edge worker's start-up CPU and 50 ms in every process that uses Redis (issue 44). hookyard never turns
redis-py's metrics on, and imports the SDK itself only when an OTLP endpoint is set.

``install`` (from ``edge`` and ``control``'s ``__init__``, before anything imports redis) makes that one probe
fail, as it does where the SDK is not installed: a finder first on ``sys.meta_path`` refuses
``opentelemetry.sdk.metrics`` only while ``redis.observability.providers`` is half imported, then removes
itself. Any other import of the SDK (ours, under OTLP) is untouched, and where the SDK was imported before
redis (a test process) redis-py finds it as before.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ("install",)

_PROBING = "redis.observability.providers"
_PROBED = "opentelemetry.sdk.metrics"


class _RefuseTheProbe(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != _PROBED:
            return None
        sys.meta_path.remove(self)  # one probe, once: the SDK imports normally from now on
        probing = sys.modules.get(_PROBING)
        if probing is not None and not hasattr(probing, "OTEL_AVAILABLE"):  # set by the probe's try/except
            raise ModuleNotFoundError(f"{_PROBED} is not loaded for redis-py's probe (shared.redis_probe)")
        return None


def install() -> None:
    """Idempotent; nothing to do once redis-py or the SDK's metrics are imported."""
    if _PROBING in sys.modules or _PROBED in sys.modules:
        return
    if not any(isinstance(finder, _RefuseTheProbe) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RefuseTheProbe())
