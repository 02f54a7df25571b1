"""Pipeline: the whole service as ``hookyard up`` runs it, ingest to delivery, and how fast it drains.

Why a bench of its own (issue 27, section 1): the parts are an order of magnitude faster than the whole.
``bench delivery`` measures one deliver worker alone, ``bench edge`` the ingest alone; here they share the
machine as they do in use. ``hookyard up`` (edge, control and one ``hookyard worker`` with every loop, on
the bench's own database and Redis prefix, its defaults otherwise: activity log lines included) forwards
everything an endpoint receives to a local sink (``bench.sink``: one line per request with its
``x-hookyard-event-id``), while ``wrk -c32`` posts a 400-byte JSON event to the ingest URL for
``PIPELINE_S`` seconds (15, or ``--seconds`` when longer; the environment's ``PIPELINE_S`` for a quick
try). Then it waits until every stored event reached the sink.

Figures (the last line):

- ``delivered_per_s``: distinct events the sink received over the whole span, from wrk's start to the
  sink's last write (the file's mtime): the rate the service sustains, drain included, not a peak;
- ``ingest_rps``, ``acked`` (wrk's completed requests less errors), ``errors`` (no 2xx), ``refused`` (of
  those, answered with another status: the edge sheds load with a 503 once 20,000 entries wait for the
  flush, ``HOOKYARD_STREAM_HIGH_WATER``), ``stored`` (the endpoint's events:
  acked plus at most the requests in flight when wrk stopped, whose answers it never read), ``delivered``
  (distinct at the sink), ``extra`` (sink lines beyond one per event), ``drain_s`` (last delivery after
  wrk's end);
- ``cpu_us_*``: CPU (user + system) per delivered event from wrk's start to the drain's end, by process:
  ``worker`` (flush, deliver and the other loops), ``edge``, ``control``, ``learn``, ``sink``, ``pg`` (every
  Postgres process: the bench's server), ``redis``; ``total`` sums them. On two cores, ``delivered_per_s``
  can reach at most 2,000,000 / ``cpu_us_total``: this is where a delivery's budget goes.
- ``ledger``: ``exact`` when every stored event was delivered exactly once and nothing acknowledged is
  missing, ``inexact`` otherwise.

Target (issue 27): ``delivered_per_s`` ≥ 6,000 with the ledger exact.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from bench import sink as bench_sink
from bench.delivery import _body, route_to_sink
from bench.infra import bench_env, free_port, run_process
from bench.setup import create_endpoint
from bench.wrk import run_wrk
from control.db import connect, stats

__all__ = ("run",)

PIPELINE_S = 15
"""wrk's duration: long enough that the drain after it is part of the figure, as it is in use."""
CONNECTIONS = 32
DRAIN_TIMEOUT_S = 600


async def _stored(database_url: str, endpoint_id: str) -> int:
    """The endpoint's events, counted row by row: the ledger's figure."""
    conn = await connect(database_url)
    try:
        return await conn.fetchval("SELECT count(*) FROM events WHERE endpoint_id = $1", endpoint_id)
    finally:
        await conn.close()


async def _counted(database_url: str, endpoint_id: str, since: datetime) -> int:
    """The endpoint's events as the flush counted them (``stats_events``, written by the statement that stores
    them, from its RETURNING): a few rows to add up, where counting the events reads them all."""
    conn = await connect(database_url)
    try:
        window = stats.Window(since.replace(second=0, microsecond=0), datetime.now(UTC) + timedelta(hours=1))
        rows = await stats.event_counts(conn, endpoint_id, window)
        return sum(row["count"] for row in rows if row["grouped"] == stats.EVENTS_BY_HOUR)
    finally:
        await conn.close()


class _SinkLines:
    """The sink's file read as it grows: only the bytes appended since the last look are parsed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: Counter[str] = Counter()
        self._offset = 0
        self._partial = b""

    def read(self) -> Counter[str]:
        if self.path.exists():
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = self._partial + f.read()
            self._offset += len(chunk) - len(self._partial)
            lines = chunk.split(b"\n")
            self._partial = lines.pop()
            self.seen.update(line.decode() for line in lines if line)
        return self.seen


def _drained(database_url: str, endpoint_id: str, sink_file: Path, since: datetime) -> tuple[int, Counter[str]]:
    """Waits until the stored events stopped growing and each reached the sink (or the timeout), and a
    moment more with nothing new, so that late extra deliveries are counted too.

    The look must not load the machine it measures: counting the endpoint's events costs Postgres a scan of
    them (about 0.15 s at 180,000, and the flush may lag wrk by several seconds, so it ran about ten times
    a run), and re-reading the whole sink file costs as much in Python. So the file is read as it grows,
    progress is followed on the flush's own counters (``_counted``), and the events themselves are counted
    once, when the sink has that many, to confirm it: the figure returned is that count."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    sink = _SinkLines(sink_file)
    stored = asyncio.run(_counted(database_url, endpoint_id, since))
    last: tuple[int, int] | None = None
    while True:
        time.sleep(1.0)
        seen = sink.read()
        counted = asyncio.run(_counted(database_url, endpoint_id, since))
        settled = counted == stored
        stored = counted
        if settled and len(seen) >= stored:
            stored = asyncio.run(_stored(database_url, endpoint_id))
        now = (stored, sum(seen.values()))
        if (settled and len(seen) >= stored and now == last) or time.monotonic() > deadline:
            return stored, seen
        last = now


def _role(proc: psutil.Process, up: int, sink: int) -> str | None:
    """Which part of the pipeline a process is, None for the rest of the machine."""
    try:
        name, tree = proc.name(), {proc.pid, *(p.pid for p in proc.parents())}
        if name.startswith("postgres"):
            return "pg"
        if name.startswith("redis-server"):
            return "redis"
        if sink in tree:
            return "sink"
        if up in tree and proc.pid != up:
            for own in (proc, *proc.parents()):  # granian's worker processes count as their server's
                args = own.cmdline()
                if "edge.app:create_app" in args or "control.app:create_app" in args:  # granian, exec'd
                    return "edge" if "edge.app:create_app" in args else "control"
                if "control.cli" in args:
                    command = args[args.index("control.cli") + 1 :]
                    return "learn" if command[:2] == ["worker", "learn"] else command[0]
            return "up"
    except (psutil.Error, ValueError, IndexError):
        return None
    return None


def _cpu(up: subprocess.Popen, sink: subprocess.Popen) -> Counter[str]:
    """Seconds of CPU (user + system) so far, by role; processes gone since are not counted."""
    spent: Counter[str] = Counter()
    for proc in psutil.process_iter():
        if (role := _role(proc, up.pid, sink.pid)) is not None:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            spent[role] += times.user + times.system
    return spent


def run(seconds: float) -> dict[str, object]:
    span_s = int(os.environ.get("PIPELINE_S", max(PIPELINE_S, round(seconds))))
    hookyard = shutil.which("hookyard") or str(Path(sys.executable).parent / "hookyard")
    with bench_env(egress="any") as bench, tempfile.TemporaryDirectory(prefix="hy-pipeline-") as data_dir:
        database_url = bench.settings.database_url or ""
        edge_port, control_port, sink_port = free_port(), free_port(), free_port()
        sink_file = Path(data_dir) / "sink.txt"
        endpoint = asyncio.run(create_endpoint(bench.settings))
        asyncio.run(route_to_sink(database_url, endpoint.id, f"http://127.0.0.1:{sink_port}/hook"))
        up = [hookyard, "up", "--data-dir", str(Path(data_dir) / "hy")]
        up += ["--edge-port", str(edge_port), "--control-port", str(control_port)]
        edge = f"http://127.0.0.1:{edge_port}"
        with (
            run_process(bench_sink.command(sink_port, sink_file), bench.env) as sink,
            run_process(up, bench.env, f"{edge}/healthz") as service,
        ):
            time.sleep(2)  # the worker LISTENing and its loops started, as the edge answers before they do
            cpu_before = _cpu(service, sink)
            since = datetime.now(UTC)
            started = time.time()
            result = run_wrk(
                f"{edge}/h/{endpoint.token}",
                seconds=span_s,
                connections=CONNECTIONS,
                body=_body(0),
                headers={"content-type": "application/json"},
            )
            ended = time.time()
            stored, seen = _drained(database_url, endpoint.id, sink_file, since)
            cpu = _cpu(service, sink)
            cpu.subtract(cpu_before)
            last_delivery = os.stat(sink_file).st_mtime if sink_file.exists() else ended
    acked = result.requests - result.errors
    delivered = len(seen)
    extra = sum(n - 1 for n in seen.values() if n > 1)
    exact = delivered == stored and extra == 0 and acked <= stored <= acked + CONNECTIONS and result.errors == 0
    return {
        "seconds": span_s,
        "connections": CONNECTIONS,
        "ingest_rps": round(result.rps),
        "acked": acked,
        "errors": result.errors,
        "refused": result.refused,
        "stored": stored,
        "delivered": delivered,
        "extra": extra,
        "drain_s": round(max(0.0, last_delivery - ended), 1),
        **{f"cpu_us_{role}": round(cpu[role] * 1e6 / max(delivered, 1)) for role in sorted(cpu)},
        "cpu_us_total": round(sum(cpu.values()) * 1e6 / max(delivered, 1)),
        "delivered_per_s": round(delivered / max(last_delivery - started, 1e-9)),
        "ledger": "exact" if exact else "inexact",
    }
