"""Runs a document's shell commands in order, as a person would, and checks their documented outputs
(``docshape``), against a live ``hookyard up``.

Before a command runs, the document's ports and local URLs become the test's (``substitutions``) and each
placeholder becomes what an earlier output captured; a placeholder nothing captured yet fails the test
(the document uses an id before it shows where it comes from). Variable assignments (``KEY=$(…)``) carry
over to later commands, as in one terminal. Commands that wait for something to happen (``hookyard listen``,
``hookyard tail``, a long poll without ``after``) run in the background while the block goes on, as in a
second terminal; a ``hookyard`` one is waited for until its first documented line (``listen``'s "Ready")
has appeared, as a person waits before typing the next command, which may rely on it (``trigger`` with no
``--endpoint`` uses the endpoint ``listen`` made); at the end of the block their documented lines must have
appeared and they are stopped (Ctrl-C) or have ended. A read (a GET) whose answer does not fit yet is asked
again until it does or a deadline passes: the flush and the deliveries run behind the API, and a person asking
again sees the same.
An answer that is an error envelope fails the command unless the document shows that error.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.onboarding.docshape import Command, Mismatch, Shape, placeholders, text_lines_match

__all__ = ("Background", "Session", "Shell")

_ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=(\$\([^()]*\)|\S*)")  # KEY=$(cat f), API=http://...
_WRITE = re.compile(r"\s-X\s*(POST|PATCH|PUT|DELETE)\b")
READ_DEADLINE_S = 30.0


def background(text: str) -> bool:
    """A command a person leaves running: it waits for events rather than answering."""
    words = text.split()
    if words[:2] in (["hookyard", "listen"], ["hookyard", "tail"]):
        return True
    return "/events/wait" in text and "after=" not in text


class Shell:
    """A command left running in a terminal of its own (its own process group), its output in ``log``."""

    def __init__(self, script: str, env: dict[str, str], cwd: Path, log: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                ["bash", "-c", script], env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    @property
    def output(self) -> str:
        return self.log.read_text()

    def ctrl_c(self, timeout: float = 20) -> int:
        """Ctrl-C as a terminal sends it, to the whole group (the shell and its command): the exit code."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@dataclass
class Background:
    command: Command
    proc: Shell
    matched: int = 0
    lines: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.matched >= len(self.command.outputs)


class Session:
    """One person's terminals in ``cwd``, with ``env``; ``binds`` holds what outputs captured so far."""

    def __init__(self, cwd: Path, env: dict[str, str], substitutions: dict[str, str]) -> None:
        self.cwd, self.env, self.substitutions = cwd, env, substitutions
        self.prelude: list[str] = []
        self.binds: dict[str, str] = {}
        self.waiting: list[Background] = []
        self.ran: list[tuple[Command, str]] = []
        self._logs = 0

    # -- text -----------------------------------------------------------------------------------------------

    def local(self, text: str) -> str:
        for documented, real in self.substitutions.items():
            text = text.replace(documented, real)
        return text

    def prepare(self, command: Command) -> str:
        """The command as it runs here: local addresses, and every placeholder as captured."""
        text = self.local(command.text)
        for name in placeholders(text):
            if name not in self.binds:
                self._progress(lambda name=name: name in self.binds, f"{name} (line {command.line})")
            text = text.replace(name, self.binds[name])
        if "…" in text:
            raise AssertionError(f"line {command.line}: a placeholder no output names: {command.text!r}")
        return text

    # -- running --------------------------------------------------------------------------------------------

    def run(self, command: Command) -> None:
        text = self.prepare(command)
        if _ASSIGNMENT.fullmatch(text.strip()):
            self.prelude.append(text.strip())
            return
        if background(text):
            self._logs += 1
            log = self.cwd / f"background-{self._logs}.log"
            proc = Shell(self._script(text), self.env, self.cwd, log)
            job = Background(command, proc)
            self.waiting.append(job)
            if text.startswith("hookyard") and command.outputs:  # its first line says it is ready (listen's
                # "Ready"): a person waits for it before typing the next command, which may rely on it
                self._progress(lambda: job.matched >= 1, f"the first documented line of {command.text!r}")
            self._advance()
            return
        read = _WRITE.search(" " + text) is None and not text.startswith("hookyard")
        deadline = time.monotonic() + READ_DEADLINE_S
        while True:
            done = subprocess.run(
                ["bash", "-c", self._script(text)],
                cwd=self.cwd,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=90,
                check=False,
            )
            where = f"line {command.line}: {text!r}"
            assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            try:
                self.binds = self.check(command, done.stdout, where)
            except Mismatch:
                if read and time.monotonic() < deadline:
                    time.sleep(0.2)  # a read asked again: what runs behind the API catches up
                    continue
                raise
            self.ran.append((command, done.stdout))
            return

    def _script(self, text: str) -> str:
        return "\n".join([*self.prelude, text])

    def check(self, command: Command, stdout: str, where: str) -> dict[str, str]:
        """The placeholders after this output; Mismatch when it does not fit what is documented."""
        outputs = [self.local(line) for line in command.outputs]
        answer = _json(stdout)
        if Shape.applies(outputs):
            shape = Shape("\n".join(outputs))
            if answer is None:
                raise Mismatch(f"{where}: JSON was documented, got {stdout!r:.500}")
            try:
                return shape.match(answer, self.binds)
            except Mismatch as exc:
                raise Mismatch(f"{where}: {exc}\nanswer: {stdout[:2000]}") from None
        if isinstance(answer, dict) and "error" in answer:
            raise Mismatch(f"{where}: answered an error the document does not show: {stdout[:500]}")
        if outputs:
            count, binds = text_lines_match(outputs, stdout, self.binds)
            if count < len(outputs):
                raise Mismatch(f"{where}: documented line {outputs[count]!r} not in the output:\n{stdout}")
            return binds
        return self.binds

    # -- background -----------------------------------------------------------------------------------------

    def _advance(self) -> None:
        for job in self.waiting:
            outputs = [self.local(line) for line in job.command.outputs]
            count, binds = text_lines_match(outputs, job.proc.output, self.binds)
            if count > job.matched:
                job.matched, self.binds = count, binds

    def _progress(self, ready: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._advance()
            if ready():
                return
            if time.monotonic() > deadline:
                shown = "\n".join(f"{j.command.text}:\n{j.proc.output}" for j in self.waiting)
                raise AssertionError(f"not shown within {timeout}s: {what}\nbackground output:\n{shown}")
            time.sleep(0.05)

    def end_block(self) -> None:
        """Every background command's documented lines shown; then each is stopped or has ended."""
        for job in self.waiting:
            self._progress(lambda job=job: job.done, f"the documented output of {job.command.text!r}")
            long_poll = job.command.text.lstrip().startswith("curl")  # it ends by itself
            code = job.proc.proc.wait(45) if long_poll else job.proc.ctrl_c()
            assert code == 0, f"{job.command.text!r} ended with {code}:\n{job.proc.output}"
            self.ran.append((job.command, job.proc.output))
        self.waiting.clear()

    def close(self) -> None:
        for job in self.waiting:
            job.proc.kill()


def _json(stdout: str) -> object | None:
    try:
        return json.loads(stdout)
    except ValueError:
        return None
