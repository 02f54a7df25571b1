"""A server process that outlives its parent keeps serving its port for ever, holding it from a restart.

The kernel can tell a process when its parent dies (``PR_SET_PDEATHSIG``), but the request is per process:
it survives ``exec`` and is cleared by ``fork``. ``hookyard up`` asks it for each child it starts (the child
then ``exec``\\s granian), and granian's main process forks its workers, which are covered only if each asks
again. So two calls: ``bind_to_parent`` in the process ``up`` starts, and ``follow_server`` in the app
factory, which granian runs in every worker. Without the second, a ``kill -9`` of granian's main process
left its workers serving the port (seen in the suite: two edge workers still answering an hour later).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import sys
import threading
import time

__all__ = ("DRAIN_BOUND_S", "SERVER_PID", "bind_to_parent", "follow_server")

log = logging.getLogger("hookyard.parent")

SERVER_PID = "HOOKYARD_SERVER_PID"
"""Set by ``hookyard edge``/``control`` to its own pid before it becomes granian (``exec`` keeps the pid):
the parent each granian worker binds itself to. Internal, and accepted as such by ``load_settings``."""

_PR_SET_PDEATHSIG = 1

DRAIN_BOUND_S = 10.0
"""How long a worker whose server died may take to drain before it exits regardless (granian's own bound on a
stopping worker, ``WORKERS_KILL_TIMEOUT_S``, is the same)."""


def bind_to_parent(parent_pid: int) -> None:
    """Linux only: SIGTERM this process when its parent dies (survives exec). Exits at once if the parent is
    already gone: it may have died before the request took effect, and then nothing would signal us."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    if os.getppid() != parent_pid:
        raise SystemExit(f"hookyard: parent process {parent_pid} is gone; not starting")


def follow_server() -> None:
    """In a granian worker started by ``hookyard edge``/``control``: end with the server's main process.
    Nothing elsewhere (an app built in a test, or by granian run by hand without ``SERVER_PID``)."""
    parent = os.environ.get(SERVER_PID)
    if parent and parent.isdigit() and os.getpid() != int(parent):
        bind_to_parent(int(parent))
        threading.Thread(target=_guard, args=(int(parent),), name="hookyard-server-watch", daemon=True).start()


def _guard(parent: int) -> None:
    """The kernel's SIGTERM can be lost: this factory runs before granian's worker listens for the signal, and
    until then the handler in place is the main process's, inherited over the fork, which sets a flag no
    worker reads (seen once in the suite: one of two workers still serving 20 s after its server's kill -9).
    So this thread waits for the parent's end itself (a pidfd: no polling), signals again once the worker
    has had time to listen, and ends the process if the drain outlasts its bound."""
    with contextlib.suppress(OSError):  # no such process: it is already gone
        fd = os.pidfd_open(parent)
        select.select([fd], [], [])
    time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(DRAIN_BOUND_S)
    log.warning("hookyard: the server process %d is gone and this worker did not stop; exiting", parent)
    os._exit(1)
