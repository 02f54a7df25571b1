"""hookyard commands as a user runs them, for the first-hour tests: one-shot (``cli``) or long-running in
their own session with their output in a file (``Proc``), and a deadline-bound wait (``until``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.stack import _hookyard

__all__ = ("Proc", "cli", "until")


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_hookyard(), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


class Proc:
    def __init__(self, args: list[str], env: dict[str, str], log: Path, *, cwd: Path | None = None) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [*_hookyard(), *args], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait_for_output(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        found = until(
            lambda: re.search(pattern, self.output, re.MULTILINE) or self.proc.poll() is not None, timeout, pattern
        )
        if not isinstance(found, re.Match):
            raise AssertionError(f"{pattern!r} not in the output of {self.proc.args}:\n{self.output}")
        return found

    def interrupt(self) -> int:
        """Ctrl-C: the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
