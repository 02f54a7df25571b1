"""Load with locust: providers and developers at once against a real stack, then the ledger.

``python -m bench load --seconds N`` starts edge, control and a worker (hookyard CLI processes, on the
bench's own database and Redis prefix), creates endpoints verifying each provider's real signatures, runs
``bench/locustfile.py`` headless with several locust processes, waits until nothing more can be stored or
delivered (``bench.quiet``), and checks the ledger by identity (``bench.load_ledger``): every request the
load's users saw answered 200 is stored under the event id it was given, exactly once (by that id and by its
idempotency key), with a valid signature, and delivered (each endpoint forwards everything to a local sink,
so each must have a successful rule delivery). Stored events nobody saw acknowledged are counted apart
(``unacked_stored``) and allowed. Locust's CSV gives the rates and percentiles only: with several processes
its counts can miss the last seconds of the run (``csv_ingest_requests`` beside ``sent`` shows by how much).
Environment: ``LOAD_USERS`` (default 40), ``LOAD_RATE`` (webhooks/s per provider user, default 50),
``LOAD_PROCESSES`` (locust processes, default 2).
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import msgspec

from bench import sink as bench_sink
from bench.delivery import route_to_sink
from bench.infra import OUT, bench_env, free_port, run_process, script
from bench.load_ledger import Ledger, judge, read_answers, stored_rows
from bench.quiet import wait_quiet
from bench.results import Target
from bench.setup import create_endpoint
from shared.keys import Keys
from shared.settings import Settings

__all__ = ("run",)

TARGETS = (
    Target(
        figure="locust, providers and developers at once: every acked event stored once, valid, delivered (by id)",
        key="ledger",
        op="==",
        bound="ok",
        beside=(
            *("acked", "lost", "duplicated", "invalid", "undelivered", "unacked_stored"),
            *("ingest_rps", "ingest_p99_ms", "control_p99_ms"),
        ),
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


DRAIN_TIMEOUT_S = 120.0
"""How long the workers get to store and deliver what the load left; the ledger is taken then either way."""


async def _ledger(settings: Settings, endpoint_ids: list[str], answers_dir: Path) -> tuple[Ledger, bool]:
    """The ledger once nothing more can be stored or delivered (``bench.quiet``), or after the timeout (then
    ``False`` beside it): waiting on that state, not on counts, so it neither stops early nor idles."""
    keys = Keys(settings.redis_prefix, settings.stream_shards)
    quiet = await wait_quiet(settings.database_url or "", settings.redis_url or "", keys, timeout_s=DRAIN_TIMEOUT_S)
    rows = await stored_rows(settings.database_url or "", endpoint_ids)
    return judge(read_answers(answers_dir), rows), quiet


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
        answers_dir = OUT / "load-answers"
        shutil.rmtree(answers_dir, ignore_errors=True)  # a previous run's answers are not this run's
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
                "answers_dir": str(answers_dir),
            }
            load_env = {**os.environ, "HOOKYARD_LOAD_PLAN": json.dumps(plan), "PYTHONPATH": str(OUT.parent.parent)}
            prefix = OUT / "load"
            subprocess.run(
                [
                    *(script("locust"), "-f", str(Path(__file__).with_name("locustfile.py")), "--headless"),
                    *("-u", str(users), "-r", str(users), "-t", f"{max(5, int(seconds))}s"),
                    *("--processes", str(processes), "--csv", str(prefix), "--only-summary"),
                    *("-L", "WARNING", "--exit-code-on-error", "0"),
                    *("--stop-timeout", "10"),  # a user finishes the request it is in: its answer is written down
                ],
                env=load_env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            stats = _rows(prefix.with_name("load_stats.csv"))
            ingest = [r for r in stats if r["Name"].startswith("ingest")]
            control = [r for r in stats if r["Type"] == "GET"]
            ledger, quiet = asyncio.run(_ledger(bench.settings, [e["id"] for e in endpoints], answers_dir))

    def rps(rows: list[dict[str, str]]) -> int:
        return round(sum(float(r["Requests/s"]) for r in rows))

    def pct(rows: list[dict[str, str]], column: str) -> int:
        return max((int(float(r[column] or 0)) for r in rows), default=0)

    return {
        "ingest_rps": rps(ingest),
        "ingest_p50_ms": pct(ingest, "50%"),
        "ingest_p99_ms": pct(ingest, "99%"),
        "control_rps": rps(control),
        "control_p50_ms": pct(control, "50%"),
        "control_p99_ms": pct(control, "99%"),
        "control_errors": sum(int(r["Failure Count"]) for r in control),
        "csv_ingest_requests": sum(int(r["Request Count"]) for r in ingest),  # locust's count, beside `sent`
        **msgspec.structs.asdict(ledger),
        "drained": quiet,
        "ledger": "ok" if ledger.ok and quiet else "MISMATCH",
    }
