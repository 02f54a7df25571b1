"""How a command starts: its settings (and the log format they name), and an event loop for its coroutine;
and how a server command that has stopped cleanly ends at once (``exit_now``)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

from shared.settings import Settings, load_settings

__all__ = ("command_settings", "exit_now", "run")


def command_settings(**overrides: object) -> Settings:
    settings = load_settings(None, **overrides)
    from shared.logs import configure

    configure(settings.log_level, settings.log_format)
    return settings


def run(coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """uvloop where installed: the worker loops are I/O bound and it is measurably faster there."""
    import asyncio  # here: `hookyard edge|control` only execs granian, and every command's parser is built without it

    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro_fn())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro_fn())


def exit_now(code: int) -> NoReturn:
    """Ends the process once its own shutdown is done (work drained, connections and servers closed),
    without the interpreter's finalization: tearing down the modules and heap of a server process took
    0.5-1 s of ``hookyard up``'s Ctrl-C on a loaded machine, and nothing of ours runs in it (no atexit
    handler is left by then). The log and standard streams are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
