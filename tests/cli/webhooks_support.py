"""What the CLI's webhook tests share: the command as a subprocess with its output in a file, waiting on a
condition, one-shot commands, and the signing secrets of their samples."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.stack import _hookyard

__all__ = ("PROVIDER_SECRET", "RESIGN", "Proc", "cli", "relay_as", "until")

PROVIDER_SECRET = "whsec_" + base64.b64encode(b"provider-secret-for-the-cli-tests").decode()
RESIGN = "whsec_" + base64.b64encode(b"the-local-apps-own-secret-32byte").decode()


class Proc:
    """A hookyard command in its own session, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [*_hookyard(), *args], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def wait_for_output(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output)
            if found:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not in the output of {self.proc.args}:\n{self.output}")

    def interrupt(self) -> int:
        """Ctrl-C: the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(20)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_hookyard(), *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def relay_as(prefix: str, headers: dict[str, str]) -> dict[str, str]:
    """The identity scheme's relay-* headers under the names a library reads."""
    return {f"{prefix}-{part}": headers[f"relay-{part}"] for part in ("id", "timestamp", "signature")}
