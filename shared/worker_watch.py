"""The watchdog ``shared.parent.follow_server`` starts beside each granian worker: run as a script, not imported.

``python -I -S worker_watch.py WORKER_PID SERVER_PIDFD BOUND_S``, the server's pidfd inherited. A process of
its own because the thread it replaces ran on the worker's interpreter: a worker whose GIL is never released
(granian's worker shutdown can deadlock, emmett-framework/granian#875) runs none of its Python, so neither its
SIGTERM handler nor a thread of ours could end it. This process shares nothing with the worker but that pidfd:
it waits for the server's end, SIGTERMs the worker once it has had time to listen (the kernel's SIGTERM can
land before it does and be dropped), and SIGKILLs it if it is still there after the drain bound. It dies with
the worker (``PR_SET_PDEATHSIG``: SIGKILL when its parent ends), so a worker that drains in time takes it
along. Standard library only, and the least of it (``-I -S``): one starts with every worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    worker, server_fd, bound_s = int(argv[1]), int(argv[2]), float(argv[3])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a Ctrl-C to the group stops the worker, not this
        signal.signal(sig, signal.SIG_IGN)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    worker_fd = os.pidfd_open(worker)  # signals through it reach this worker, never a later owner of its pid
    if os.getppid() != worker:  # it ended before the request took effect: nothing to watch
        return
    select.select([server_fd], [], [])  # readable once the server has exited
    time.sleep(1.0)
    signal.pidfd_send_signal(worker_fd, signal.SIGTERM)
    time.sleep(bound_s)
    sys.stderr.write(f"hookyard: worker {worker} did not stop {bound_s:g} s after its server ended; killing it\n")
    sys.stderr.flush()
    signal.pidfd_send_signal(worker_fd, signal.SIGKILL)


if __name__ == "__main__":
    with contextlib.suppress(ProcessLookupError):  # the worker ended between two steps: done
        main(sys.argv)
