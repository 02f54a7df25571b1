"""Outbound HTTP: the egress policy, building and sending a request, the retry schedule and the circuit.

Used by the deliver worker (rule deliveries) and by the control plane (replay, destination test), so both
send with the same headers rules, timeouts, response limits and egress checks. Shaping per destination
(issue 27) lives here too: ``throttle`` (the rate limit's Redis key), ``ordering`` (the stream watermarks
FIFO claims wait for) and ``shaping`` (what the deliver worker does with a claimed batch).
"""
