"""The edge's metrics: requests by outcome and provider, and the latency of accepted requests.

Module-level, because ``edge.respond`` counts every error answer by its code without a handle on the app
(one place counts all rejections: 404, 410, 401, 403, 413, 503 backpressure, ...). ``shared.metrics`` says
why an update is a plain add and how the workers' totals meet at ``/metrics``.
"""

from __future__ import annotations

from shared.metrics import Metrics

__all__ = ("EDGE", "LATENCY", "REQUESTS")

EDGE = Metrics("edge")
REQUESTS = EDGE.counter(
    "hookyard_edge_requests_total",
    "Requests the edge answered, by outcome (accepted or the error code) and attributed provider",
    ("outcome", "provider"),
)
LATENCY = EDGE.histogram(
    "hookyard_edge_request_duration_seconds",
    "From the start of handling to the 200 of an accepted request (the stream write included)",
)
