"""Running "copy as curl" the way its user does: the shipped builder (``control/static/curl.js``, in node)
turns an event into text, and a real shell runs that text with ``curl`` defined as a function that records
its arguments (NUL-separated) and its stdin (bytes), in an empty directory that nothing may write to.

What the text must send is said here once (``request_parts``): the method, the URL, every header that one
curl argument can carry, the body bytes on stdin. A payload that ran shows as a file left in the directory,
output, an error, or a second ``curl`` call.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ("SHELLS", "Copier", "Ran", "copier_process", "request_parts", "run_copied")

HARNESS = Path(__file__).with_name("copy_as_curl.mjs")
SHELLS = ("bash", "dash")
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "transfer-encoding",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "expect",
    }
)
FAKE_CURL = r"""curl() {
  printf 'call\n' >> "$HY_OUT/calls"
  printf '%s\0' "$@" >> "$HY_OUT/args"
  cat >> "$HY_OUT/stdin"
}
"""


def require(program: str) -> str:
    """The program's path; skips without it, or fails under CI=true, where a skip would pass CI unseen."""
    found = shutil.which(program)
    if found is None:
        message = f"{program} is missing (apt-get install -y {'nodejs' if program == 'node' else program})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@dataclass(frozen=True)
class Parts:
    """A request as curl arguments: method, URL, the -H arguments (sorted: distinct fields have no order),
    and the body (stdin of ``--data-binary @-``), or None for no body."""

    method: bytes
    url: bytes
    headers: tuple[bytes, ...]
    body: bytes | None


def _bytes(text: str, encoding: str | None) -> bytes:
    return base64.b64decode(text) if encoding == "base64" else text.encode()


def request_parts(ingest: str, event: dict[str, Any]) -> Parts:
    """What the copied command must send for ``event`` (as the inbox data route returns it).

    Headers left out: hop-by-hop ones (curl sets its own), names that are not RFC 9110 tokens (curl reads
    ``@name`` as a file and splits ``a:b`` elsewhere), values with NUL (no argument can hold it) or CR/LF
    (they would be header lines of their own). An empty value is ``name;``: curl drops a header ``name:``."""
    path = event["path"] if event["path"] not in ("", "/") else ""  # stored with its slash; "/" is the bare URL
    url = ingest + path + (f"?{event['query']}" if event["query"] else "")
    headers = []
    encodings = event.get("header_encodings") or {}
    for name, value in event["headers"].items():
        raw = _bytes(value, encodings.get(name))
        if name.lower() in HOP or not TOKEN.fullmatch(name) or any(c in raw for c in b"\0\r\n"):
            continue
        headers.append(name.encode() + (b": " + raw if raw else b";"))
    body = None if event["body"] is None else _bytes(event["body"], event["body_encoding"])
    return Parts(event["method"].encode(), url.encode(), tuple(sorted(headers)), body)


@dataclass(frozen=True)
class Ran:
    """What running the copied text did."""

    returncode: int
    stdout: bytes
    stderr: bytes
    left: list[str]
    """Files in the working directory afterwards (it starts empty): a payload's canary."""
    calls: int
    args: list[bytes]
    stdin: bytes

    def parts(self) -> Parts:
        """The arguments read back as ``Parts``; an argument of any other shape fails the test."""
        args = self.args
        assert args[:1] == [b"-X"], args
        assert args[2:3] == [b"--globoff"], args
        method, url, rest = args[1], args[3], args[4:]
        body = None
        if rest[-2:] == [b"--data-binary", b"@-"]:
            rest, body = rest[:-2], self.stdin
        else:
            assert self.stdin == b"", "stdin was read without a body to send"
        assert len(rest) % 2 == 0, rest
        assert rest[0::2] == [b"-H"] * (len(rest) // 2), rest
        return Parts(method, url, tuple(sorted(rest[1::2])), body)

    def assert_clean(self) -> None:
        """Exactly one curl call, and nothing else happened: no output, no error, no file."""
        assert (self.returncode, self.stderr, self.stdout, self.left) == (0, b"", b"", []), self
        assert self.calls == 1, self


def run_copied(text: str, shell: str) -> Ran:
    """``text`` run by ``shell`` after the fake curl's definition, as a script, in an empty directory."""
    with tempfile.TemporaryDirectory(prefix="hy-curl-") as tmp:
        cwd, out = Path(tmp, "cwd"), Path(tmp, "out")
        cwd.mkdir()
        out.mkdir()
        script = Path(tmp, "copied.sh")
        script.write_text(FAKE_CURL + text + "\n")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LC_ALL": "C.UTF-8", "HY_OUT": str(out)}
        done = subprocess.run(
            [require(shell), str(script)], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=20
        )
        calls = out / "calls"
        return Ran(
            returncode=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            left=sorted(os.listdir(cwd)),
            calls=len(calls.read_text().splitlines()) if calls.exists() else 0,
            args=(out / "args").read_bytes().split(b"\0")[:-1] if (out / "args").exists() else [],
            stdin=(out / "stdin").read_bytes() if (out / "stdin").exists() else b"",
        )


class Copier:
    """One node process running the shipped curl.js: many events, one process (it starts in ~50 ms)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc

    def __call__(self, ingest: str, event: dict[str, Any]) -> str:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"ingest": ingest, "event": event}) + "\n")
        self._proc.stdin.flush()
        answer = json.loads(self._proc.stdout.readline())
        assert "text" in answer, answer.get("error")
        return answer["text"]


def copier_process() -> Iterator[Copier]:
    """The body of a fixture: the node harness, stopped after."""
    proc = subprocess.Popen(
        [require("node"), str(HARNESS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
    )
    try:
        yield Copier(proc)
    finally:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()
