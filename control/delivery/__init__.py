"""Outbound HTTP, and one leased task's path from its claim to its record (the loop that runs it is the deliver
worker, ``control.workers.deliver``): ``claim``, ``ready``, ``shaping``, ``attempt`` (one attempt), ``transforms``
(a destination's transform applied), ``auth``, ``send`` and ``transport``, ``retry``, ``circuit``, ``recorder``
(docs/adr/0067-delivery-in-one-package.md).

Used by the deliver worker (rule deliveries) and by the control plane (replay, destination test), so both
send with the same headers rules, timeouts, response limits and egress checks. Shaping per destination
(issue 27) lives here too: ``throttle`` (the rate limit's Redis key), ``ordering`` (the stream watermarks
FIFO claims wait for) and ``shaping`` (what the deliver worker does with a claimed batch).
"""
