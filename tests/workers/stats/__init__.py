"""GET /v1/endpoints/{id}/stats and the ``health`` of GET /v1/destinations/{id}: counters kept by real flushes
and real deliveries to loopback destinations, checked against exact expected numbers, one module for event
counts and one for deliveries and destination health."""
