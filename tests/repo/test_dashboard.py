"""The Grafana dashboard and docs/ALERTS.md name only metrics that exist, so neither drifts from the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

from control.support.metrics import CONTROL, LIVE_GAUGES, WORKER
from edge.metrics import EDGE

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"\bhookyard_[a-z_]*[a-z]")


def known() -> set[str]:
    names = set(LIVE_GAUGES)
    for metrics in (EDGE, CONTROL, WORKER):
        names |= set(metrics.counters)
        for name in metrics.histograms:
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def test_the_dashboard_queries_only_existing_metrics() -> None:
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "hookyard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {name for expr in exprs for name in _NAME.findall(expr)}
    assert used, "no metric queried"
    assert used <= known(), sorted(used - known())
    # every metric the processes expose has a panel
    exposed = {n.removesuffix("_bucket") for n in known() if not n.endswith(("_sum", "_count"))}
    shown = {n.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") for n in used}
    assert exposed <= shown, sorted(exposed - shown)


def test_the_alerts_name_only_existing_metrics() -> None:
    used = set(_NAME.findall((ROOT / "docs" / "ALERTS.md").read_text()))
    assert used <= known(), sorted(used - known())
    assert {"hookyard_edge_requests_total", "hookyard_stream_lag", "hookyard_dead_letters_total"} <= used


def test_the_rules_file_is_the_alerts_table() -> None:
    """deploy/prometheus/hookyard-rules.yml has exactly the alerts of docs/ALERTS.md: names, expressions,
    durations and severities; the backlog alerts among them."""
    import yaml

    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "hookyard-rules.yml").read_text())["groups"][0]["rules"]
    got = {r["alert"]: (r["expr"], r.get("for", "0m"), r["labels"]["severity"]) for r in rules}
    table = {}
    for line in (ROOT / "docs" / "ALERTS.md").read_text().splitlines():
        if re.match(r"^\| [A-Z][A-Za-z]+ \|", line):
            name, expr, duration, severity = [c.strip() for c in line.strip("|").split(" | ")][:4]
            table[name] = (expr.strip("`"), duration, severity)
    assert got == table
    used = {name for expr, _, _ in got.values() for name in _NAME.findall(expr)}
    assert used <= known(), sorted(used - known())
    assert {"hookyard_delivery_backlog_seconds", "hookyard_stream_lag_seconds"} <= used
