"""``python -m bench all``: every bench with short durations, and the edge against the baseline a user
would otherwise write, into ``bench/RESULTS.md`` (figure, target, measured, ratio where compared)."""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.infra import bench_env, free_port, run_process
from bench.wrk import run_wrk

__all__ = ("run",)

RESULTS = Path(__file__).with_name("RESULTS.md")


def _baseline(seconds: float) -> float:
    """FastAPI + uvicorn + one INSERT per request, same wrk load and body as the edge bench."""
    from bench.request import payload

    with bench_env() as bench:
        port = free_port()
        uvicorn = shutil.which("uvicorn") or str(Path(sys.executable).parent / "uvicorn")
        args = [uvicorn, "bench.baseline:app", "--port", str(port), "--log-level", "warning", "--no-access-log"]
        with run_process(args, bench.env, f"http://127.0.0.1:{port}/healthz"):
            body, headers = payload()
            url = f"http://127.0.0.1:{port}/h/token"
            run_wrk(url, seconds=1, body=body, headers=headers)
            return statistics.mean(run_wrk(url, seconds=seconds, body=body, headers=headers).rps for _ in range(2))


def _row(figure: str, target: str, measured: str, ratio: str = "", verdict: str = "") -> str:
    return f"| {figure} | {target} | {measured} | {ratio} | {verdict} |"


def _budget_rows(edge: dict[str, object], counts: dict[str, object] | None) -> list[str]:
    """The edge's margin in instructions: the per-request work it adds to its floor, and how much 0.85x would
    leave for that work, scaling the count by the live seconds per request of the same run."""
    hello_s, floor_s, edge_s = (1 / float(edge[k]) for k in ("hello_rps", "floor_rps", "edge_rps"))
    if counts is None or edge_s <= floor_s:  # no counts, or the edge as fast as its floor: nothing to scale
        return []
    extra = int(counts["extra_instr"])
    allowed = extra * (hello_s / 0.85 - floor_s) / (edge_s - floor_s)
    glue = extra - int(counts["decide_instr"]) - int(counts["ulid_instr"])
    return [
        _row(
            "edge's own work per request over the floor (callgrind)",
            "(context)",
            f"{extra:,} instructions: header map + attribution + signature {int(counts['decide_instr']):,} "
            f"(of which the HMAC {int(counts['hmac_instr']):,}), id {int(counts['ulid_instr']):,}, "
            f"the rest (lookup, checks, record, response) {glue:,}",
            "",
        ),
        _row(
            "what 0.85x would leave for it (same run's live seconds per request)",
            "(context)",
            f"{round(allowed):,} instructions; the rest + id + the HMAC alone: "
            f"{glue + int(counts['ulid_instr']) + int(counts['hmac_instr']):,}",
            f"{round(allowed / extra, 2)}",
        ),
    ]


def run(seconds: float) -> dict[str, object]:
    short = max(4.0, seconds / 6)
    figures: dict[str, dict[str, object]] = {}
    for name in ("edge", "instructions", "flush", "list", "stats", "types", "wait", "delivery", "pipeline", "load"):
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError:
            continue
        started = time.monotonic()
        # Tuning note: the edge gets 20 alternated rounds: single rounds' ratios spread by ±30% on two cores
        # shared with wrk, and the mean of 10 still moved by ±0.04 from run to run (why rounds at all:
        # docs/adr/0007-edge-judged-by-python-cpu-per-request.md).
        figures[name] = module.run({"list": 2, "edge": 120}.get(name, short))
        figures[name]["_s"] = round(time.monotonic() - started)
    baseline_rps = _baseline(short / 2)
    e, f, li, w = figures["edge"], figures["flush"], figures["list"], figures["wait"]
    ok = "met"
    rows = [
        _row(
            "edge ingest vs bare granian (verification on)",
            "≥ 0.85×",
            f"{e['edge_rps']} vs {e['hello_rps']} req/s, mean of {e['rounds']} alternated rounds "
            f"(single rounds {e['round_ratio_min']}-{e['round_ratio_max']})",
            f"{e['ratio']}",
            ok if float(e["ratio"]) >= 0.85 else "missed",
        ),
        _row(
            "CPU of granian's Python thread per request (median of the rounds)",
            "(context)",
            f"edge {e['edge_main_us']} µs, floor {e['floor_main_us']} µs, bare app {e['hello_main_us']} µs",
            "",
        ),
        _row(
            "edge floor: only the durable batched write, vs bare granian",
            "(context)",
            f"{e['floor_rps']} vs {e['hello_rps']} req/s",
            f"{e['floor_ratio']}",
        ),
        *_budget_rows(e, figures.get("instructions")),
        _row(
            "edge ingest vs FastAPI + uvicorn + 1 INSERT",
            "(context)",
            f"{e['edge_rps']} vs {round(baseline_rps)} req/s",
            f"{round(float(e['edge_rps']) / baseline_rps, 1)}×",
        ),
        _row(
            "edge latency p99 at half peak (paced wrk -c64)",
            "≤ 5 ms",
            f"{e['half_peak_p99_ms']} ms at {e['half_peak_rps']} req/s",
            "",
            "met" if float(e["half_peak_p99_ms"]) <= 5 else "missed",
        ),
        _row("edge latency p99 at peak (wrk -c64)", "(context)", f"{e['p99_ms']} ms", ""),
        _row(
            "flush, stream → Postgres",
            "≥ 20,000 events/s",
            f"{f['events_per_s']} events/s",
            f"{round(float(f['events_per_s']) / 20000, 2)}",
            ok if float(f["events_per_s"]) >= 20000 else "missed",
        ),
        _row(
            "flush with schema learning on vs off (median pairs, both orders; 1 event in 20 a real GitHub payload)",
            "≥ 0.9×",
            f"{f['events_per_s']} vs {f['learn_off_events_per_s']} events/s (best drains)",
            f"{f['learn_ratio']}",
            ok if float(f["learn_ratio"]) >= 0.9 else "missed",
        ),
        _row(
            "events list with filters, 1M events, p99",
            "≤ 25 ms",
            f"{li['filters_p99_ms']} ms",
            "",
            ok if float(li["filters_p99_ms"]) <= 25 else "missed",
        ),
        _row(
            "events list `q`, 1M events, p99",
            "≤ 200 ms",
            f"{li['q_p99_ms']} ms",
            "",
            ok if float(li["q_p99_ms"]) <= 200 else "missed",
        ),
        _row(
            "events/wait, 1,000 waiters, wake-up p99",
            "≤ 100 ms",
            f"{w['wake_p99_ms']} ms",
            "",
            ok if float(w["wake_p99_ms"]) <= 100 else "missed",
        ),
    ]
    if "stats" in figures:
        st = figures["stats"]
        rows.append(
            _row(
                "endpoint stats, 1M events + 1M deliveries in 24 h, p99",
                "≤ 50 ms",
                f"{st['p99_ms']} ms (p50 {st['p50_ms']} ms; destination health p99 {st['destination_p99_ms']} ms)",
                "",
                ok if float(st["p99_ms"]) <= 50 else "missed",
            )
        )
    if "types" in figures:
        ty = figures["types"]
        rows.append(
            _row(
                f"schema `/types` of a {ty['paths']}-path schema learned from real payloads, p99 (worst language)",
                "≤ 20 ms",
                f"{ty['p99_ms']} ms (made afresh, in process: p50 {ty['cold_p50_ms']} ms, p99 {ty['cold_p99_ms']} ms; "
                f"`union=true` over {int(ty['schemas']) - 1} types: p99 {ty['union_p99_ms']} ms)",
                "",
                ok if float(ty["p99_ms"]) <= 20 else "missed",
            )
        )
    if "delivery" in figures:
        d = figures["delivery"]
        rows.append(
            _row(
                "delivery to a local sink, one worker",
                "≥ 2,000/s",
                f"{d.get('deliveries_per_s')} /s",
                "",
                ok if float(d.get("deliveries_per_s", 0)) >= 2000 else "missed",
            )
        )
        if "transformed_per_s" in d:
            rows.append(
                _row(
                    "delivery with a trivial transform vs without (same worker, alternated rounds)",
                    "≤ 150 µs per delivery",
                    f"{d['transformed_per_s']} vs {d['deliveries_per_s']} /s: "
                    f"{d['transform_us_per_delivery']} µs per delivery",
                    "",
                    ok if float(d["transform_us_per_delivery"]) <= 150 else "missed",
                )
            )
        rows.append(
            _row(
                "ingest → first attempt at 500 events/s",
                "p50 ≤ 25 ms, p99 ≤ 250 ms",
                f"p50 {d.get('first_attempt_p50_ms')} ms, p99 {d.get('first_attempt_p99_ms')} ms",
                "",
                ok
                if float(d.get("first_attempt_p50_ms", 1e9)) <= 25 and float(d.get("first_attempt_p99_ms", 1e9)) <= 250
                else "missed",
            )
        )
    if "pipeline" in figures:
        pi = figures["pipeline"]
        rows.append(
            _row(
                "pipeline: delivered/s over the whole span, `hookyard up` + sink + wrk -c32 (issue 27)",
                "≥ 6,000/s, ledger exact",
                f"{pi['delivered_per_s']} /s ({pi['delivered']} of {pi['acked']} acked at {pi['ingest_rps']} req/s; "
                f"drain {pi['drain_s']} s; ledger {pi['ledger']})",
                "",
                ok if float(pi["delivered_per_s"]) >= 6000 and pi["ledger"] == "exact" else "missed",
            )
        )
    if "load" in figures:
        lo = figures["load"]
        rows.append(
            _row(
                "locust ledger (acked = stored = distinct = valid = delivered)",
                "exact",
                f"{lo['acked']} / {lo['stored']} / {lo['distinct']} / {lo['signature_valid']} / {lo['delivered']}",
                "",
                "met" if lo["ledger"] == "ok" else "MISMATCH",
            )
        )
    text = "\n".join(
        [
            "# Benchmark results",
            "",
            f"Produced by `python -m bench all` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
            f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}. "
            "Load generators run on the same machine. Every figure's raw line is below the table.",
            "",
            "| figure | target (DESIGN.md §6) | measured | ratio | verdict |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "## Raw figures",
            "",
            *(f"- `{name}`: " + " ".join(f"{k}={v}" for k, v in fig.items()) for name, fig in figures.items()),
            f"- `baseline`: fastapi_uvicorn_insert_rps={round(baseline_rps)}",
            "",
        ]
    )
    RESULTS.write_text(text)
    return {"written": str(RESULTS.name), **{f"{n}_s": fig["_s"] for n, fig in figures.items()}}
