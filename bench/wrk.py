"""Runs wrk (Debian package ``wrk``) and parses its figures."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ("WrkResult", "run_wrk")

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"unreadable wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _lua(method: str, body: bytes, headers: dict[str, str]) -> str:
    lines = [f'wrk.method = "{method}"', f"wrk.body = {_lua_string(body)}"]
    lines += [f"wrk.headers[{_lua_string(k.encode())}] = {_lua_string(v.encode())}" for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def _lua_string(data: bytes) -> str:
    return '"' + "".join(f"\\{b}" for b in data) + '"'


def run_wrk(
    url: str,
    *,
    seconds: float,
    connections: int = 64,
    threads: int = 2,
    method: str = "POST",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> WrkResult:
    exe = shutil.which("wrk")
    if exe is None:
        raise SystemExit("bench needs wrk as its load generator: apt-get install wrk")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_lua(method, body, headers or {}))
    try:
        out = subprocess.run(
            [
                exe,
                f"-t{threads}",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                "--latency",
                "-s",
                script.name,
                url,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        Path(script.name).unlink(missing_ok=True)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE).group(1))
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = int(non2xx.group(1)) if non2xx else 0
    if socket_errors:
        errors += sum(int(g) for g in socket_errors.groups())
    return WrkResult(rps=rps, p50_ms=p50, p99_ms=p99, requests=requests, errors=errors)
