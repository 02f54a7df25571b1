"""Transforms that end their sandbox process with a V8 fatal error, for the tests of what follows a crash.

``Array.prototype.sort`` on an object whose ``length`` is past V8's largest array asks for a work array of
that length: V8's length check is fatal at once ("Fatal JavaScript out of memory: invalid array length"),
within milliseconds of the call. The split past the largest array (``"x".repeat(2**27+100).split("")``)
that the tests used before is fatal too, but only once it has filled about half a gigabyte: 0.1 s of CPU
alone (most of it the kernel's, page faults), 0.2-0.35 s from the call's start at load 6, which a more
loaded machine stretched past the pool's kill at 1.25 s, and the call failed as "still running after 1 s"
instead of ending its process. The sort costs no measurable CPU before it dies.
"""

from __future__ import annotations

__all__ = ("FATAL", "FATAL_ON_2")

_SORT = "Array.prototype.sort.call({length: 2**27+100});"

FATAL = f"function handler(r) {{ {_SORT} return null; }}"
"""Ends its process on every call."""
FATAL_ON_2 = f"function handler(r) {{ if (r.body === 2) {_SORT} return r; }}"
"""Ends its process on the call whose body is 2, echoes every other."""
