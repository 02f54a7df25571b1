"""The edge: a raw-ASGI app on granian that writes arriving webhooks to Redis streams (docs/architecture.md)."""

from shared import redis_probe

redis_probe.install()  # before anything of the edge imports redis: its OpenTelemetry probe is not paid for
