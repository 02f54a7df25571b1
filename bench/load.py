"""Load with locust: providers and developers at once against a real stack, then the ledger.

``python -m bench load --seconds N`` starts edge, control and a worker (hookyard CLI processes, on the
bench's own database and Redis prefix), creates endpoints verifying each provider's real signatures, runs
``bench/locustfile.py`` headless with several locust processes, waits for the workers to drain, and checks
the ledger: every acknowledged ingest is stored, each exactly once (one row per provider delivery id),
with a valid signature, and delivered (each endpoint forwards everything to a local sink, so every stored
event must have a successful rule delivery). Environment: ``LOAD_USERS`` (default 40), ``LOAD_RATE``
(webhooks/s per provider user, default 50), ``LOAD_PROCESSES`` (locust processes, default 2).
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import subprocess
import time
from pathlib import Path

import asyncpg

from bench import sink as bench_sink
from bench.delivery import route_to_sink
from bench.infra import OUT, bench_env, free_port, run_process, script
from bench.results import Target
from bench.setup import create_endpoint

__all__ = ("run",)

TARGETS = (
    Target(
        figure="locust, providers and developers at once: acked = stored = distinct = valid = delivered",
        key="ledger",
        op="==",
        bound="ok",
        beside=("acked", "stored", "delivered", "ingest_rps", "ingest_p99_ms", "control_p99_ms"),
    ),
)


SECRETS = {
    "payments": "whsec_loadtest_payments_secret_0123456789",
    "identity": "whsec_" + "bG9hZHRlc3QtaWRlbnRpdHktc2VjcmV0LWtleS0wMTIz",
    "commerce": "shpss_loadtest_commerce_secret_0123",
    "code_host": "loadtest-code-host-secret-0123456789",
}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


async def _ledger(dsn: str, endpoint_ids: list[str], acked: int, timeout_s: float = 120) -> dict[str, int]:
    """Waits (bounded) until the workers have stored and delivered everything acknowledged, then counts."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            row = await conn.fetchrow(
                """SELECT count(*) AS stored, count(DISTINCT (endpoint_id, idempotency_key)) AS distinct_keys,
                          count(*) FILTER (WHERE signature_valid) AS valid,
                          (SELECT count(DISTINCT d.event_id) FROM deliveries d
                            WHERE d.endpoint_id = any($1::text[]) AND d.source = 'rule' AND d.success) AS delivered
                     FROM events WHERE endpoint_id = any($1::text[])""",
                endpoint_ids,
            )
            done = row["stored"] >= acked and row["delivered"] >= row["stored"]
            if done or time.monotonic() > deadline:
                return dict(row)
            await asyncio.sleep(0.5)
    finally:
        await conn.close()


def run(seconds: float) -> dict[str, object]:
    users = int(os.environ.get("LOAD_USERS", "40"))
    rate = float(os.environ.get("LOAD_RATE", "50"))
    processes = int(os.environ.get("LOAD_PROCESSES", "2"))
    with bench_env(rate_limit_per_s=100_000, rate_limit_burst=100_000, egress="any") as bench:
        first = asyncio.run(create_endpoint(bench.settings, secret=SECRETS["payments"], tolerance_s=600))
        account = (first.account_id, first.api_key)
        endpoints = [{"id": first.id, "token": first.token, "provider": "payments"}]
        for provider in [*list(SECRETS)[1:], *SECRETS]:
            ep = asyncio.run(
                create_endpoint(bench.settings, secret=SECRETS[provider], tolerance_s=600, account=account)
            )
            endpoints.append({"id": ep.id, "token": ep.token, "provider": provider})
        edge_port, control_port, sink_port = free_port(), free_port(), free_port()
        sink = f"http://127.0.0.1:{sink_port}/hook"
        for endpoint in endpoints:  # every event matches a forward-all rule to the sink
            asyncio.run(route_to_sink(bench.settings.database_url, endpoint["id"], sink))
        edge_url, control_url = f"http://127.0.0.1:{edge_port}", f"http://127.0.0.1:{control_port}"
        hookyard = script("hookyard")
        with (
            run_process([hookyard, "edge", "--port", str(edge_port)], bench.env, f"{edge_url}/healthz"),
            run_process([hookyard, "control", "--port", str(control_port)], bench.env, f"{control_url}/healthz"),
            run_process([hookyard, "worker"], bench.env),
            run_process(bench_sink.command(sink_port), bench.env),
        ):
            plan = {
                "edge_url": edge_url,
                "control_url": control_url,
                "endpoints": endpoints,
                "secrets": SECRETS,
                "api_key": first.api_key,
                "developer_endpoints": endpoints,
                "rate_per_user": rate,
            }
            load_env = {**os.environ, "HOOKYARD_LOAD_PLAN": json.dumps(plan), "PYTHONPATH": str(OUT.parent.parent)}
            prefix = OUT / "load"
            subprocess.run(
                [
                    *(script("locust"), "-f", str(Path(__file__).with_name("locustfile.py")), "--headless"),
                    *("-u", str(users), "-r", str(users), "-t", f"{max(5, int(seconds))}s"),
                    *("--processes", str(processes), "--csv", str(prefix), "--only-summary"),
                    *("-L", "WARNING", "--exit-code-on-error", "0"),
                    *("--stop-timeout", "10"),  # users finish their request: no acknowledged-but-uncounted sends
                ],
                env=load_env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            stats = _rows(prefix.with_name("load_stats.csv"))
            ingest = [r for r in stats if r["Name"].startswith("ingest")]
            control = [r for r in stats if r["Type"] == "GET"]
            acked = sum(int(r["Request Count"]) - int(r["Failure Count"]) for r in ingest)
            ledger = asyncio.run(_ledger(bench.settings.database_url, [e["id"] for e in endpoints], acked))
    total = next(r for r in stats if r["Name"] == "Aggregated")

    def rps(rows: list[dict[str, str]]) -> int:
        return round(sum(float(r["Requests/s"]) for r in rows))

    def pct(rows: list[dict[str, str]], column: str) -> int:
        return max((int(float(r[column] or 0)) for r in rows), default=0)

    ok = ledger["stored"] == acked == ledger["distinct_keys"] == ledger["valid"] == ledger["delivered"]
    return {
        "ingest_rps": rps(ingest),
        "ingest_p50_ms": pct(ingest, "50%"),
        "ingest_p99_ms": pct(ingest, "99%"),
        "control_rps": rps(control),
        "control_p50_ms": pct(control, "50%"),
        "control_p99_ms": pct(control, "99%"),
        "errors": int(total["Failure Count"]),
        "acked": acked,
        "stored": ledger["stored"],
        "distinct": ledger["distinct_keys"],
        "signature_valid": ledger["valid"],
        "delivered": ledger["delivered"],
        "ledger": "ok" if ok else "MISMATCH",
    }
