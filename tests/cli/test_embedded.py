"""The embedded servers on their own: data that survives a restart, one owner per data dir, and no wider
directory permissions than Postgres's system user needs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import asyncpg
import pytest
import redis

from control.cli.embedded import running_database_url, start_embedded
from shared.errors import EmbeddedError


async def _pg(dsn: str, sql: str) -> object:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql) if sql.startswith("SELECT") else await conn.execute(sql)
    finally:
        await conn.close()


@pytest.mark.slow
async def test_data_survives_a_restart_and_the_dir_has_one_owner(private_dir: Path) -> None:
    data_dir = private_dir / "data"

    servers = start_embedded(data_dir)
    try:
        assert servers.database_url is not None
        assert servers.redis_url is not None
        assert servers.redis_url.startswith("redis://")
        await _pg(servers.database_url, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
        with redis.Redis.from_url(servers.redis_url) as client:
            client.set("kept", "yes")
        assert running_database_url(data_dir / "postgres") == servers.database_url
        with pytest.raises(EmbeddedError, match="in use by another hookyard process"):
            start_embedded(data_dir)
    finally:
        servers.stop()
    servers.stop()  # idempotent
    assert running_database_url(data_dir / "postgres") is None

    if os.geteuid() == 0:  # Postgres runs as another user: it may traverse the 0700 dir, nobody may list it
        assert stat.S_IMODE(private_dir.stat().st_mode) == 0o711

    again = start_embedded(data_dir)
    try:
        assert again.database_url is not None
        assert again.redis_url is not None
        assert await _pg(again.database_url, "SELECT v FROM kept") == 42
        with redis.Redis.from_url(again.redis_url) as client:
            assert client.get("kept") == b"yes"
    finally:
        again.stop()


@pytest.mark.slow
async def test_a_second_start_in_one_process_starts_again_despite_a_dead_handle(private_dir: Path) -> None:
    """A process killed while it held the server (``hookyard up`` under kill -9, a bench interrupted) stays in
    pgserver's handle list; that made pgserver keep the stopped server cached, and the next start in the same
    process (a bench's next run) got it back unstarted: "started but postmaster.pid names no socket"."""
    data_dir = private_dir / "data"
    first = start_embedded(data_dir, redis=False)
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    (data_dir / "postgres" / ".handle_pids.json").write_text(f"[{dead}, {os.getpid()}]")
    first.stop()
    again = start_embedded(data_dir, redis=False)
    try:
        assert again.database_url is not None
        assert await _pg(again.database_url, "SELECT 1") == 1
    finally:
        again.stop()


def test_only_the_servers_asked_for_are_started(tmp_path: Path) -> None:
    servers = start_embedded(tmp_path / "d", postgres=False, redis=False)
    try:
        assert (servers.database_url, servers.redis_url) == (None, None)
        assert not (tmp_path / "d" / "postgres").exists()
        assert not (tmp_path / "d" / "redis").exists()
    finally:
        servers.stop()
