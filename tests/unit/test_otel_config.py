"""The ``OTEL_*`` variables checked before a server starts (``shared.otel_config``): each value the SDK would
refuse, misread or quietly replace is one ConfigError naming the variable and what it accepts; the start
lines' description names endpoints by host and port only, and never an OTLP header's value (a vendor's key)."""

from __future__ import annotations

import pytest

from shared.errors import ConfigError
from shared.otel_config import check, describe

ON = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' is not"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://c:4317"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: grpc://c:4317"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "ten"}, "OTEL_EXPORTER_OTLP_TIMEOUT: 'ten' is not a positive number"),
        ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION: 'zstd' is not one of none"),
        ({"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, "OTEL_EXPORTER_OTLP_CERTIFICATE: '/nonexis"),
        ({"OTEL_BSP_SCHEDULE_DELAY": "0.5"}, "OTEL_BSP_SCHEDULE_DELAY: '0.5' is not a whole number"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "100"}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 512 is more than"),
        ({"OTEL_TRACES_SAMPLER": "ratio"}, "OTEL_TRACES_SAMPLER: 'ratio' is not one of parentbased_always_on"),
        (
            {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "5"},
            "OTEL_TRACES_SAMPLER_ARG: '5' is not a share of traces from 0 to 1",
        ),
        ({"OTEL_METRIC_EXPORT_INTERVAL": "-1"}, "OTEL_METRIC_EXPORT_INTERVAL: '-1' is not a positive number"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER: 'zipkin' is not supported"),
    ],
)
def test_a_value_the_sdk_would_not_use_is_one_error_naming_it(variables: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check({**ON, **variables})
    assert str(raised.value).startswith(message), raised.value


def test_a_header_value_is_never_shown() -> None:
    with pytest.raises(ConfigError) as raised:
        check({**ON, "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key:s3cret-token"})
    assert str(raised.value).startswith("OTEL_EXPORTER_OTLP_HEADERS: not a list of name=value pairs")
    assert "s3cret" not in str(raised.value)


def test_nothing_is_checked_or_said_when_nothing_is_exported() -> None:
    off = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_BSP_SCHEDULE_DELAY": "x"}
    check(off)
    check({**ON, **off, "OTEL_SDK_DISABLED": "true"})
    assert describe(off) is None


def test_the_description_names_hosts_and_never_a_secret() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pw-in-url@otlp.example.com:4318/otlp?token=t0k",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cret-token",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.05",
        "OTEL_METRIC_EXPORT_INTERVAL": "15000",
    }
    check(env)
    assert describe(env) == (
        "tracing: spans to https://otlp.example.com:4318 (sampler parentbased_traceidratio 0.05) with the headers "
        "set (not shown), backlog metrics to https://otlp.example.com:4318 every 15s with the headers set (not "
        "shown) over OTLP/HTTP"
    )
