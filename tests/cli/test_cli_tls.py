"""A ``hookyard`` command builds TLS trust only for an https control plane (``control.support.client_tls``):
against a plain-HTTP one it loads no CA bundle (that was ~40 ms of every command's CPU), and against an https
one it still verifies, refusing a self-signed certificate. The command runs as a user runs it, in a process of
its own, with ``ssl.SSLContext``'s loading methods counted there; the control plane is a real loopback server
answering every request with an error envelope, so the command ends after its first call."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.destination import Destination, Reply, serving
from tests.onboarding.clirun import clean_env

# The command, with every CA loading of its process counted and told on stderr at exit.
COUNTED = """
import atexit, ssl, sys
loads = []
for name in ("load_verify_locations", "load_default_certs", "set_default_verify_paths"):
    def counted(self, *args, _original=getattr(ssl.SSLContext, name), **kwargs):
        loads.append(args)
        return _original(self, *args, **kwargs)
    setattr(ssl.SSLContext, name, counted)
atexit.register(lambda: print(f"CA loads: {len(loads)}", file=sys.stderr))
from control.cli import main
sys.exit(main(sys.argv[1:]))
"""

NOT_FOUND = Reply(
    status=404,
    body=b'{"error":{"code":"not_found","message":"no such endpoint"}}',
    headers={"content-type": "application/json"},
)


def trigger(control_url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = clean_env(HOOKYARD_API_KEY="hy_" + "a" * 32, HOOKYARD_DATA_DIR=str(data_dir))
    args = ["trigger", "payments", "invoice.paid", "--endpoint", "ep_x", "--control-url", control_url]
    return subprocess.run(
        [sys.executable, "-c", COUNTED, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def ca_loads(done: subprocess.CompletedProcess[str]) -> int:
    found = re.search(r"^CA loads: (\d+)$", done.stderr, re.MULTILINE)
    assert found is not None, done.stderr
    return int(found.group(1))


@pytest.fixture
def plain() -> Iterator[Destination]:
    with serving() as server:
        server.reply(default=NOT_FOUND)
        yield server


@pytest.fixture
def self_signed(tmp_path: Path) -> Iterator[Destination]:
    (tmp_path / "tls").mkdir()
    with serving(tls_dir=tmp_path / "tls") as server:
        server.reply(default=NOT_FOUND)
        yield server


def test_a_command_against_plain_http_loads_no_ca_bundle(plain: Destination, tmp_path: Path) -> None:
    done = trigger(plain.url.removesuffix("/hook"), tmp_path)
    assert done.returncode == 1, done.stderr
    assert "no such endpoint" in done.stderr
    assert plain.requests, "the command did not reach the server"
    assert ca_loads(done) == 0


def test_a_command_against_https_verifies_and_refuses_a_self_signed_server(
    self_signed: Destination, tmp_path: Path
) -> None:
    done = trigger(self_signed.url.removesuffix("/hook"), tmp_path)
    assert done.returncode == 1, done.stderr
    assert "cannot reach the control plane at https://127.0.0.1:" in done.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in done.stderr
    assert not self_signed.requests
    assert ca_loads(done) >= 1  # the trust is built, and verification refused the certificate
