"""The baseline a user would otherwise write: FastAPI under uvicorn, one Postgres INSERT per webhook.

Served by ``uvicorn bench.baseline:app`` with ``DATABASE_URL`` set; the table is created on start.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import asyncpg
from fastapi import FastAPI, Request


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=4, max_size=10)
    await app.state.pool.execute(
        """CREATE TABLE IF NOT EXISTS baseline_events (
               id bigserial PRIMARY KEY, token text, headers jsonb, body bytea,
               received_at timestamptz DEFAULT now())"""
    )
    yield
    await app.state.pool.close()


app = FastAPI(lifespan=lifespan)


@app.post("/h/{token}")
async def ingest(token: str, request: Request) -> dict[str, object]:
    body = await request.body()
    headers = dict(request.headers)
    import json

    row_id = await request.app.state.pool.fetchval(
        "INSERT INTO baseline_events (token, headers, body) VALUES ($1, $2::jsonb, $3) RETURNING id",
        token,
        json.dumps(headers),
        body,
    )
    return {"ok": True, "id": row_id}


@app.get("/healthz")
async def healthz() -> dict[str, bool]:
    return {"ok": True}
