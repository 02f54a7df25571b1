"""``python -m bench all``: every bench, briefly, and the edge's load against the baseline a user would otherwise
write, into ``bench/RESULTS.md`` (``bench.results``: a row per target, each bench's last line below).

``BENCH_ONLY=name,...`` runs only those benches and keeps the other rows of the file as they were. A bench
that cannot finish (a tool missing, the machine too busy for its deadlines) gets rows saying "not measured"
and why, and the others still run: the table never shows a figure nobody measured.
"""

from __future__ import annotations

import importlib
import os
import statistics
import time
import traceback

from bench.infra import bench_env, free_port, run_process, script
from bench.results import Measured, Target, commit, machine, today, write
from bench.wrk import run_wrk

__all__ = ("ORDER", "run")

ORDER = (
    "edge",
    "instructions",
    "flush",
    "list",
    "stats",
    "types",
    "wait",
    "delivery",
    "neighbours",
    "pipeline",
    "load",
    "faults",
    "erasure",
    "baseline",
)
"""Every bench ``bench all`` runs, in the table's order (``baseline`` is this module's own, below)."""

BASELINE_TARGETS = (
    Target(
        figure="FastAPI + uvicorn + one INSERT per request, the edge bench's load and body",
        key="fastapi_uvicorn_insert_rps",
        unit=" req/s",
        beside=("edge_rps", "edge_over_baseline"),
    ),
)


def _baseline(seconds: float) -> dict[str, object]:
    """FastAPI + uvicorn + one INSERT per request, same wrk load and body as the edge bench."""
    from bench.request import payload

    with bench_env() as bench:
        port = free_port()
        uvicorn = script("uvicorn")
        args = [uvicorn, "bench.baseline:app", "--port", str(port), "--log-level", "warning", "--no-access-log"]
        with run_process(args, bench.env, f"http://127.0.0.1:{port}/healthz"):
            body, headers = payload()
            url = f"http://127.0.0.1:{port}/h/token"
            run_wrk(url, seconds=1, body=body, headers=headers)
            rps = statistics.mean(run_wrk(url, seconds=seconds, body=body, headers=headers).rps for _ in range(2))
    return {"fastapi_uvicorn_insert_rps": round(rps)}


def _seconds(name: str, seconds: float) -> float:
    """Each bench's duration: short, but the edge gets 10 rounds of 22 s (each app alone, then three of them
    together).

    Tuning note: single rounds' ratios spread by ±30% on two cores shared with wrk, and the mean of 10 still
    moved by ±0.04 from run to run (why rounds at all: docs/adr/0007-edge-judged-by-python-cpu-per-request.md).
    """
    return {"list": 2.0, "edge": 220.0}.get(name, max(4.0, seconds / 6))


def _measure(name: str, seconds: float) -> tuple[Measured, tuple[Target, ...]]:
    started, where = today(), machine()
    if name == "baseline":
        run, targets = _baseline, BASELINE_TARGETS
    else:
        module = importlib.import_module(f"bench.{name}")
        run, targets = module.run, module.TARGETS
    print(f"bench all: {name} ({where})", flush=True)
    try:
        figures = run(seconds)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - SystemExit included: a bench's own "cannot measure"
        traceback.print_exc()
        reason = " ".join(f"{type(error).__name__}: {error}".split()).replace("|", "/")[:300]
        return Measured(
            name=name, seconds=seconds, failure=reason, date=started, commit=commit(), machine=where
        ), targets
    print(f"bench all: {name} done", flush=True)
    return Measured(name=name, seconds=seconds, figures=figures, date=started, commit=commit(), machine=where), targets


def run(seconds: float) -> dict[str, object]:
    only = [n for n in os.environ.get("BENCH_ONLY", "").split(",") if n]
    unknown = set(only) - set(ORDER)
    if unknown:
        raise SystemExit(f"BENCH_ONLY names no bench: {', '.join(sorted(unknown))} (benches: {', '.join(ORDER)})")
    measured: list[Measured] = []
    targets: dict[str, tuple[Target, ...]] = {}
    took: dict[str, int] = {}
    for name in only or ORDER:
        begun = time.monotonic()
        result, targets[name] = _measure(name, _seconds(name, seconds))
        took[f"{name}_s"] = round(time.monotonic() - begun)
        measured.append(result)
        write(measured, ORDER, targets)  # after each bench: a later one failing keeps what was measured
    edge = next((m for m in measured if m.name == "edge" and not m.failure), None)
    base = next((m for m in measured if m.name == "baseline" and not m.failure), None)
    if edge and base:  # the edge's rate over the baseline's, both from this run
        base.figures["edge_rps"] = edge.figures["edge_rps"]
        base.figures["edge_over_baseline"] = round(
            float(str(edge.figures["edge_rps"])) / float(str(base.figures["fastapi_uvicorn_insert_rps"])), 1
        )
        write(measured, ORDER, targets)
    failed = [m.name for m in measured if m.failure]
    return {"written": write(measured, ORDER, targets).name, "not_measured": ",".join(failed) or "none", **took}
