"""Delivery: the deliver worker, its transport and egress policy, signing, bodies, retries and replays against
real loopback destinations (``tests.destination``), in process and through real processes."""
