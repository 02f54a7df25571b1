"""End to end through real processes (``tests.stack``): edge, control and workers together on the test's database
and Redis prefix: capture, scale-out, faults, logs, metrics, a Redis Cluster, MCP over HTTP, schemathesis and
a real browser."""
