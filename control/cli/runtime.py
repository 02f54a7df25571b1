"""How a command starts: its settings (and the log format they name), and an event loop for its coroutine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from shared.settings import Settings, load_settings

__all__ = ("command_settings", "run")


def command_settings(**overrides: object) -> Settings:
    settings = load_settings(None, **overrides)
    from shared.logs import configure

    configure(settings.log_level, settings.log_format)
    return settings


def run(coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """uvloop where installed: the worker loops are I/O bound and it is measurably faster there."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro_fn())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro_fn())
