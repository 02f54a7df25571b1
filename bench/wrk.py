"""Runs wrk (Debian package ``wrk``) and parses its figures."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ("WrkResult", "run_wrk", "run_wrk_paced")

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    """Requests that got no 2xx: answered otherwise (``refused``) or lost to a socket error or wrk's timeout."""
    refused: int = 0
    """Of ``errors``, those answered with a status outside 2xx/3xx (the edge's 503 backpressure, say)."""


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"unreadable wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _lua(
    method: str, body: bytes, headers: dict[str, str], delay_ms: int | None, paths: list[str] | None = None
) -> str:
    lines = [f'wrk.method = "{method}"', f"wrk.body = {_lua_string(body)}"]
    lines += [f"wrk.headers[{_lua_string(k.encode())}] = {_lua_string(v.encode())}" for k, v in headers.items()]
    if delay_ms is not None:
        lines.append(f"function delay() return {delay_ms} end")
    if paths:  # each request to one of them, drawn at random
        lines.append("paths = {" + ", ".join(_lua_string(p.encode()) for p in paths) + "}")
        lines.append("function request() return wrk.format(nil, paths[math.random(#paths)]) end")
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
    delay_ms: int | None = None,
    paths: list[str] | None = None,
) -> WrkResult:
    """At full speed, or with every connection pausing ``delay_ms`` between its requests (wrk's ``delay()``);
    ``paths``: each request to one of them at random instead of ``url``'s own."""
    exe = shutil.which("wrk")
    if exe is None:
        raise SystemExit("bench needs wrk as its load generator: apt-get install wrk")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(_lua(method, body, headers or {}, delay_ms, paths))
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
    refused = errors = int(non2xx.group(1)) if non2xx else 0
    if socket_errors:
        errors += sum(int(g) for g in socket_errors.groups())
    return WrkResult(rps=rps, p50_ms=p50, p99_ms=p99, requests=requests, errors=errors, refused=refused)


def run_wrk_paced(url: str, *, rate: float, seconds: float, connections: int = 64, **options: object) -> WrkResult:
    """Near ``rate`` requests/s: a short calibration round measures the cycle each connection needs besides
    its pause, and the measured round pauses so that the cycles add up to the rate (whole milliseconds, so
    the achieved rate is read off the result, not assumed)."""
    cycle_ms = connections * 1000 / rate
    delay_ms = max(1, round(cycle_ms))
    probe = run_wrk(url, seconds=2, connections=connections, delay_ms=delay_ms, **options)
    busy_ms = max(0.0, connections * 1000 / max(probe.rps, 1.0) - delay_ms)
    delay_ms = max(1, round(cycle_ms - busy_ms))
    return run_wrk(url, seconds=seconds, connections=connections, delay_ms=delay_ms, **options)
