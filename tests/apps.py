"""The control app a test serves: one built earlier in this process, given the test's settings (ADR 0044).

Building the app (Litestar parsing every handler's signature, copying the handlers) costs about a third of a
second of CPU, more than the rest of a test's setup together; hundreds of tests serve it. Its lifespan, on the
other hand, starts from ``app.state.settings`` alone and makes everything anew (pool, Redis, Wakeups, the MCP
session manager, ``app.state``), so an app serves one test after another: ``control.app.bind`` gives it the
next test's settings before its lifespan starts.

Apps are kept free per ``shape`` (what is fixed at build time: the request body limit). A test that serves two
apps at once gets two, as before; an app whose lifespan did not end cleanly is not served again. A test that
needs an app of its own (one it changes, routes it registers) still calls ``create_app``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from litestar import Litestar

from control.app import bind, create_app, shape
from shared.settings import Settings

__all__ = ("control_app",)

_FREE: dict[tuple[int], list[Litestar]] = {}


@contextlib.contextmanager
def control_app(settings: Settings) -> Iterator[Litestar]:
    """A control app bound to ``settings``, this caller's alone until the block ends; run its lifespan inside."""
    free = _FREE.setdefault(shape(settings), [])
    app = free.pop() if free else create_app(settings)
    bind(app, settings)
    yield app  # not back on the free list if the block raised: that lifespan may not have ended
    free.append(app)
