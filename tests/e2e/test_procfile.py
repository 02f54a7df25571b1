"""deploy/Procfile under honcho (the dev extra installs it), as its comment says to run it: ``honcho run
hookyard migrate`` then ``honcho start``. A trial found the stack gone at once: the ``release`` line was a
process like the others, and when its migrations were done honcho stopped edge, control and worker and exited
0. Here every process must still be up and serving a few seconds after both HTTP roles first answered."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.stack import free_port, stop_group

pytestmark = pytest.mark.slow

PROCFILE = Path(__file__).resolve().parents[2] / "deploy" / "Procfile"


def _two_free_ports() -> int:
    """A base port whose +100 is free too: honcho gives the Procfile's first line the base, the second +100."""
    for _ in range(20):
        base = free_port()
        if base + 100 < 65536:
            with contextlib.suppress(OSError), socket.create_server(("127.0.0.1", base + 100)):
                return base
    raise RuntimeError("no base port with its +100 free")


def test_the_procfile_stays_up_under_honcho(settings: Settings, tmp_path: Path) -> None:
    base = _two_free_ports()
    edge, control = f"http://127.0.0.1:{base}", f"http://127.0.0.1:{base + 100}"
    (tmp_path / "env").write_text(
        f"DATABASE_URL={settings.database_url}\nREDIS_URL={settings.redis_url}\n"
        f"HOOKYARD_REDIS_PREFIX={settings.redis_prefix}\nHOOKYARD_ENCRYPTION_KEYS={settings.encryption_keys[0]}\n"
        f"HOOKYARD_HOST=127.0.0.1\nHOOKYARD_PUBLIC_EDGE_URL={edge}\nHOOKYARD_PUBLIC_CONTROL_URL={control}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this tree's `hookyard`
    honcho = [sys.executable, "-m", "honcho", "-f", str(PROCFILE), "-e", str(tmp_path / "env")]
    migrated = subprocess.run([*honcho, "run", "hookyard", "migrate"], env=env, capture_output=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    log = tmp_path / "honcho.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*honcho, "start", "-p", str(base)], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        with httpx.Client(timeout=2, trust_env=False) as http:
            for url in (edge, control):
                deadline = time.monotonic() + 60
                while True:
                    assert proc.poll() is None, log.read_text()
                    with contextlib.suppress(httpx.TransportError):
                        if http.get(url + "/livez").status_code == 200:
                            break
                    assert time.monotonic() < deadline, f"{url} never answered\n{log.read_text()}"
                    time.sleep(0.1)
            deadline = time.monotonic() + 60
            while "worker: running" not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"the worker never started\n{log.read_text()}"
                time.sleep(0.1)
            time.sleep(3)
            assert proc.poll() is None, log.read_text()
            assert "stopped" not in log.read_text(), log.read_text()
            for url in (edge, control):
                assert http.get(url + "/livez").status_code == 200, url
    finally:
        stop_group(proc, grace_s=30)
