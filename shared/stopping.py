"""Learning that the process was asked to stop, before the server stops serving: for requests that would
otherwise hold the shutdown up (long polls, event streams).

granian drains on SIGTERM/SIGINT: it stops accepting, waits for every request in flight to finish, and only
then runs the ASGI lifespan's shutdown. A long poll parked for 30 s holds the worker that long, and whoever
stops it (``hookyard up``, a container runtime) gives up first and kills it, dropping the connection. The app
must hear the signal itself, when it arrives, to answer such requests at once (204, the stream closed).

granian's worker registers its handler with ``loop.add_signal_handler`` (the loop learns of the signal
through its wakeup fd; the Python-level handler it installs is a no-op or the loop's own bound method), and
the app's lifespan startup runs after that. ``on_stop_signal`` puts a Python-level handler in front of the
one found and calls it in turn, so the loop's own dispatch, and granian's drain, are unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = ("STOP_SIGNALS", "on_stop_signal")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def on_stop_signal(callback: Callable[[], None]) -> Iterator[None]:
    """Calls ``callback`` in the running loop, once, on the first SIGINT or SIGTERM received in the block; the
    handlers found before are called as well and put back when the block ends. Only a signal some Python
    handler already takes is chained (under granian, the loop's); only the main thread may set handlers:
    elsewhere (an app under a test client's thread) this does nothing."""
    loop = asyncio.get_running_loop()
    fired = False

    def fire() -> None:
        nonlocal fired
        if not fired:
            fired = True
            callback()

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in STOP_SIGNALS:
            found = signal.getsignal(sig)
            if not callable(found):  # SIG_DFL ends the process anyway, SIG_IGN never stops it: nothing to add
                continue

            def chained(
                signum: int, frame: FrameType | None, found: Callable[[int, FrameType | None], Any] = found
            ) -> None:
                loop.call_soon_threadsafe(fire)
                found(signum, frame)

            signal.signal(sig, chained)
            previous[sig] = found
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for sig, found in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, found)
