"""Payloads through the real flush: an endpoint, the records the edge writes for them, and a drain of the
ingest stream by ``control.workers.flush`` with a Learner; the one copy of these steps for every test that
learns schemas (this folder's, and ``tests/erasure``'s and ``tests/control/bad_input``'s)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg

from bench import real
from control.db.context import Context, Principal
from control.routing.route import Router
from control.schemas.learn import Learner
from control.service import schemas as service
from control.workers.flush import Flush
from control.workers.learn import Learn
from shared import ids
from shared.wire import IngestRecord, encode_records
from tests import node_packages
from tests.conftest import ingest_record, make_account

__all__ = (
    "NODE",
    "code_host_record",
    "flush",
    "flush_only",
    "learned",
    "make_endpoint",
    "node_work",
    "principal",
    "record",
    "run",
    "tsc",
)


async def make_endpoint(database_url: str, account_id: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        endpoint_id = ids.new_id("ep")
        await conn.execute(
            """INSERT INTO endpoints (id, account_id, name, environment, ingest_token, signing_secret)
               VALUES ($1, $2, 'schemas', 'production', $3, 'whsec_x')""",
            endpoint_id,
            account_id,
            ids.ingest_token(),
        )
    finally:
        await conn.close()
    return endpoint_id


def code_host_record(
    endpoint_id: str, event_type: str, body: Any, provider: str | None = "code_host", **kw: Any
) -> IngestRecord:
    """What the edge writes for a verified delivery of ``body`` (JSON unless bytes) with ``X-GitHub-Event``."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return real.code_host_record(endpoint_id, event_type, raw, provider, **kw)


def record(
    endpoint_id: str, body: Any, provider: str | None = "payments", event_type: str | None = None, **kw: Any
) -> IngestRecord:
    """An attributed ingest record of ``body`` (JSON unless bytes); its event type is the body's ``type``."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if event_type is None and provider is not None and isinstance(body, dict):
        event_type = body.get("type")
    return ingest_record(
        endpoint_id, raw, source_ip="203.0.113.9", provider=provider, event_type=event_type, id=ids.new_id("evt"), **kw
    )


async def flush_only(ctx: Context, records: list[IngestRecord], per_entry: int = 50) -> None:
    """The records through the real flush, noting for learning, with no learner running."""
    for i in range(0, len(records), per_entry):
        await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": encode_records(records[i : i + per_entry])})
    step = Flush(ctx, consumer="c", block_ms=5, claim_every_s=0, router=Router(ctx), learn=True)
    await step.ensure_groups()
    while await step.step():
        pass


async def flush(ctx: Context, records: list[IngestRecord], learner: Learner | None = None, per_entry: int = 50) -> None:
    """The records through the real flush, and what it noted learned."""
    await flush_only(ctx, records, per_entry)
    learn = Learn(ctx, learner=learner or Learner())  # what the flush noted, learned as the learn loop does
    while await learn.step():
        pass


def principal(account_id: str) -> Principal:
    return Principal(account_id=account_id, key_id="test", kind="live")


async def learned(
    ctx: Context, database_url: str, *phases: list[tuple[str, dict[str, Any]]]
) -> tuple[str, dict[str, str]]:
    """A new account whose one endpoint received the events ((event type, payload)) of each phase in order,
    each phase flushed and learned before the next: (account id, schema id by event type)."""
    account = await make_account(database_url)
    endpoint_id = await make_endpoint(database_url, account.id)
    for events in phases:
        await flush(ctx, [code_host_record(endpoint_id, t, p) for t, p in events])
    schemas = (await service.list_schemas(ctx, principal(account.id))).schemas
    return account.id, {s.event_type or "": s.id for s in schemas}


NODE = node_packages.NODE
"""The npm packages the generated code is checked with (``tests.node_packages``; a test asks for them with the
session fixture ``node_modules``, which installs them when stale)."""


def run(args: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@contextlib.contextmanager
def node_work() -> Iterator[Path]:
    """A folder inside tests/node (so imports find its node_modules) with a strict tsconfig, removed after."""
    work = NODE / f".gen-{uuid.uuid4().hex[:10]}"
    work.mkdir()
    try:
        (work / "package.json").write_text('{"type": "module"}')
        options = {
            "strict": True,
            "module": "nodenext",
            "moduleResolution": "nodenext",
            "target": "es2022",
            "outDir": "out",
            "skipLibCheck": True,
            "types": ["node"],
        }
        (work / "tsconfig.json").write_text(json.dumps({"compilerOptions": options, "include": ["*.ts"]}))
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tsc(work: Path) -> str:
    return run([str(NODE / "node_modules" / ".bin" / "tsc"), "-p", "."], work)
