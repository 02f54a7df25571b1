"""Outbound HTTP: the egress policy, building and sending a request, the retry schedule and the circuit.

Used by the deliver worker (rule deliveries) and by the control plane (replay, destination test), so both
send with the same headers rules, timeouts, response limits and egress checks.
"""
