"""A server process that outlives its parent keeps serving its port for ever, holding it from a restart.

The kernel can tell a process when its parent dies (``PR_SET_PDEATHSIG``), but the request is per process:
it survives ``exec`` and is cleared by ``fork``. ``hookyard up`` asks it for each child it starts (the child
then ``exec``\\s granian), and granian's main process forks its workers, which are covered only if each asks
again. So two calls: ``bind_to_parent`` in the process ``up`` starts, and ``follow_server`` in the app
factory, which granian runs in every worker. Without the second, a ``kill -9`` of granian's main process
left its workers serving the port (seen in the suite: two edge workers still answering an hour later).

A worker may still not act on that SIGTERM (lost before it listens, or a GIL held for good), so
``follow_server`` also starts a watchdog process beside it (``shared.worker_watch``, ADR 0077) that SIGKILLs
it once it has outlived its server by ``DRAIN_BOUND_S``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys

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
        _start_watchdog(int(parent))


def _start_watchdog(parent: int) -> None:
    """The kernel's SIGTERM is not enough. It can be lost: this factory runs before granian's worker listens
    for it, and until then the handler in place is the main process's, inherited over the fork, which sets a
    flag no worker reads. And a worker whose GIL is held for good (as in granian's shutdown deadlocks) acts on no
    signal at all, nor would a thread of ours run in it: one of two workers was seen still alive 20 s after
    its server's kill -9 with such a thread in place. So a process of its own (``shared.worker_watch``) waits
    for the server's end, signals again once the worker has had time to listen, and SIGKILLs it if the drain
    outlasts ``DRAIN_BOUND_S``. The server's pidfd is opened here, while the server is still this worker's
    parent (checked after), so a pid reused later cannot stand in for it."""
    if not hasattr(os, "pidfd_open"):  # not Linux: PR_SET_PDEATHSIG is not there either
        return
    gone = f"hookyard: parent process {parent} is gone; not starting"
    try:
        server_fd = os.pidfd_open(parent)
    except ProcessLookupError:
        raise SystemExit(gone) from None
    try:
        if os.getppid() != parent:
            raise SystemExit(gone)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_watch.py")
        _WATCHDOGS.append(
            subprocess.Popen(
                [sys.executable, "-I", "-S", script, str(os.getpid()), str(server_fd), str(DRAIN_BOUND_S)],
                stdin=subprocess.DEVNULL,
                pass_fds=(server_fd,),
            )
        )
    finally:
        os.close(server_fd)


_WATCHDOGS: list[subprocess.Popen[bytes]] = []
"""Held for the worker's life: a Popen collected while its process runs would warn (``ResourceWarning``)."""
