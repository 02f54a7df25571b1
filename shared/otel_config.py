"""The ``OTEL_*`` variables hookyard's tracing reads, checked and described before a server starts.

The OpenTelemetry SDK reads them itself, in each process, once it is set up: inside granian's worker for the
edge and control plane, after ``hookyard up`` had started Postgres and Redis and migrated. There a value
hookyard cannot use raised two ExceptionGroup tracebacks and an "edge exited during start-up"; a value the SDK
cannot parse it replaces with its default and logs a warning (a traceback for ``OTEL_BSP_*``) or fails every
export. :func:`check` reads them with the ``HOOKYARD_*`` settings instead, so each ends as one line naming the
variable and what it accepts (a ``ConfigError``, exit 2). :func:`describe` says where the export goes, for the
start lines, from ``safe_url`` of the endpoints only: ``OTEL_EXPORTER_OTLP_HEADERS`` usually holds a vendor's
token, and no message here ever shows its value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from shared.errors import ConfigError
from shared.logs import safe_url

__all__ = ("check", "describe", "exporting")

_SIGNALS = {
    "traces": ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"),
    "metrics": ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER"),
}
_SAMPLERS = (
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
    "always_on",
    "always_off",
    "traceidratio",
)
_COMPRESSIONS = ("none", "gzip", "deflate")
# The SDK reads these with int(); a value it cannot read it replaces with its default, after a traceback.
_BSP_INTEGERS = (
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_EXPORT_TIMEOUT",
)
_POSITIVE_NUMBERS = {"traces": (), "metrics": ("OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT")}


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def exporting(signal: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``signal`` (``traces`` or ``metrics``) goes to an OTLP endpoint: one is set (the signal's own
    or the common one), the SDK is not disabled and the signal's exporter is not ``none``. ConfigError for
    what hookyard cannot do (an exporter other than OTLP, OTLP over gRPC)."""
    env = _env(environ)
    own, exporter_variable = _SIGNALS[signal]
    if not (env.get(own) or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return False
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get(exporter_variable, "otlp").strip().lower() or "otlp"
    if exporter == "none":
        return False
    if exporter != "otlp":
        raise ConfigError(f"{exporter_variable}: {exporter!r} is not supported; hookyard exports otlp (or none)")
    for variable in ("OTEL_EXPORTER_OTLP_PROTOCOL", f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"):
        protocol = env.get(variable, "").strip().lower()
        if protocol and protocol != "http/protobuf":
            raise ConfigError(
                f"{variable}: {protocol!r} is not supported; hookyard sends OTLP over HTTP: http/protobuf "
                "(a collector's OTLP/HTTP receiver, port 4318 by default)"
            )
    return True


def check(environ: Mapping[str, str] | None = None) -> None:
    """ConfigError naming the first ``OTEL_*`` variable the SDK would refuse, misread or replace with its
    default, for each signal that is exported; nothing when none is."""
    env = _env(environ)
    for signal in _SIGNALS:
        if exporting(signal, env):
            _check_exporter(signal, env)
    if exporting("traces", env):
        _check_traces(env)


def _check_exporter(signal: str, env: Mapping[str, str]) -> None:
    own = signal.upper()
    for variable in (f"OTEL_EXPORTER_OTLP_{own}_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        url = env.get(variable, "").strip()
        if url and (not url.lower().startswith(("http://", "https://")) or safe_url(url).startswith("(")):
            raise ConfigError(
                f"{variable}: {safe_url(url) if '://' in url else repr(url)} is not an http(s) URL; "
                "give the collector's OTLP/HTTP receiver, e.g. http://otel-collector:4318"
            )
    for variable in (f"OTEL_EXPORTER_OTLP_{own}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        _positive(env, variable, "seconds (the Python SDK reads it in seconds)")
    for variable in (f"OTEL_EXPORTER_OTLP_{own}_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"):
        value = env.get(variable, "").strip().lower()
        if value and value not in _COMPRESSIONS:
            raise ConfigError(f"{variable}: {value!r} is not one of {', '.join(_COMPRESSIONS)}")
    for variable in (f"OTEL_EXPORTER_OTLP_{own}_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"):
        pairs = [pair for pair in env.get(variable, "").split(",") if pair.strip()]
        if any("=" not in pair or not pair.partition("=")[0].strip() for pair in pairs):
            raise ConfigError(f"{variable}: not a list of name=value pairs (its value is not shown: it may hold a key)")
    for part in ("CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"):
        for variable in (f"OTEL_EXPORTER_OTLP_{own}_{part}", f"OTEL_EXPORTER_OTLP_{part}"):
            if (path := env.get(variable, "").strip()) and not os.path.isfile(path):
                raise ConfigError(f"{variable}: {path!r} is not a file")
    for variable in _POSITIVE_NUMBERS[signal]:
        _positive(env, variable, "milliseconds")


def _check_traces(env: Mapping[str, str]) -> None:
    sizes: dict[str, int] = {}
    for variable in _BSP_INTEGERS:
        if text := env.get(variable, "").strip():
            if not text.isdigit() or int(text) < 1:
                raise ConfigError(f"{variable}: {text!r} is not a whole number of at least 1")
            sizes[variable] = int(text)
    queue, batch = sizes.get("OTEL_BSP_MAX_QUEUE_SIZE", 2048), sizes.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
    if batch > queue:
        raise ConfigError(f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE: {batch} is more than OTEL_BSP_MAX_QUEUE_SIZE ({queue})")
    sampler = env.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if sampler and sampler not in _SAMPLERS:
        raise ConfigError(f"OTEL_TRACES_SAMPLER: {sampler!r} is not one of {', '.join(_SAMPLERS)}")
    if sampler.endswith("traceidratio"):
        text = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
        if text and not (_number(text) and 0 <= float(text) <= 1):  # unset: all of them, as the SDK reads it
            raise ConfigError(f"OTEL_TRACES_SAMPLER_ARG: {text!r} is not a share of traces from 0 to 1 (for {sampler})")


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _positive(env: Mapping[str, str], variable: str, unit: str) -> None:
    text = env.get(variable, "").strip()
    if text and not (_number(text) and float(text) > 0):
        raise ConfigError(f"{variable}: {text!r} is not a positive number of {unit}")


def describe(environ: Mapping[str, str] | None = None, *, metrics: bool = True) -> str | None:
    """Where this process exports, for its start line (after :func:`check`); None when nothing is exported.
    Endpoints as ``scheme://host:port`` only; of the headers, only that they are set. ``metrics=False`` for
    the edge, which exports spans only (the backlog is read by control and the workers)."""
    env = _env(environ)
    parts = []
    for signal in _SIGNALS:
        if not exporting(signal, env) or (signal == "metrics" and not metrics):
            continue
        own = signal.upper()
        url = env.get(f"OTEL_EXPORTER_OTLP_{own}_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        if signal == "traces":
            sampler = env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
            arg = env.get("OTEL_TRACES_SAMPLER_ARG", "").strip() if sampler.endswith("traceidratio") else ""
            parts.append(f"spans to {safe_url(url)} (sampler {sampler}{' ' + arg if arg else ''})")
        else:
            every = _seconds(env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip() or "60000")
            parts.append(f"backlog metrics to {safe_url(url)} every {every}")
        if env.get(f"OTEL_EXPORTER_OTLP_{own}_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS"):
            parts[-1] += " with the headers set (not shown)"
    return "tracing: " + ", ".join(parts) + " over OTLP/HTTP" if parts else None


def _seconds(millis: str) -> str:
    seconds = float(millis) / 1000
    return f"{seconds:g}s"
