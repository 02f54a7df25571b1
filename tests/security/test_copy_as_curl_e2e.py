"""End to end: a hostile request sent as raw bytes to the real edge (granian), flushed by
the real worker into Postgres, read back through the inbox's data route, turned into "copy as curl" text by
the shipped builder, and run: in bash and dash with the recording curl (exactly the request's parts,
nothing else ran), then in bash with the real curl, which must capture the same request again."""

from __future__ import annotations

import base64
import html
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from control.support.client_tls import verify_for
from tests.conftest import make_account
from tests.security.curl_support import SHELLS, Copier, copier_process, request_parts, require, run_copied
from tests.stack import Stack

pytestmark = pytest.mark.slow

METHOD = "PO`touch$IFS'x'`ST"
PATH = "a'$(touch${IFS}p)'|&;\\\""  # granian refuses ` < > in a path, not in a query
QUERY = "x=';touch${IFS}r;'&a[0]={1,2}&$(touch${IFS}s)"
HEADER = ("x-`touch$ifs'y'`|&", "'; touch z; '$(touch w) `touch v`")  # lowercase: granian lowercases names
CONTENT_TYPE = "text/plain; x=$(touch c)"
BODY = b"@/etc/passwd\x00\xff'$(touch b)'\n%s\\c"


@pytest.fixture(scope="module")
def copy() -> Iterator[Copier]:
    yield from copier_process()


def send_raw(url: str, target: str) -> bytes:
    """The request exactly as an attacker writes it (an HTTP client would refuse or re-encode parts of it)."""
    where = urlsplit(url)
    head = (
        f"{METHOD} {target} HTTP/1.1\r\nHost: {where.netloc}\r\n{HEADER[0]}: {HEADER[1]}\r\n"
        f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.sendall(head.encode() + BODY)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def events(stack: Stack, headers: dict[str, str], endpoint_id: str, want: int) -> list[dict[str, Any]]:
    """The endpoint's events, in full, from the inbox's data routes once ``want`` are there (newest first),
    polled through one client (``httpx.get`` makes one per call, with its TLS context: tests.stack's waits)."""
    deadline = time.monotonic() + 15
    verify = verify_for(stack.control_url)
    with httpx.Client(base_url=stack.control_url, headers=headers, timeout=10, verify=verify) as inbox:
        while True:
            page = inbox.get(f"/inbox/{endpoint_id}/events")
            assert page.status_code == 200, page.text
            listed = page.json()["events"]
            if len(listed) >= want:
                break
            assert time.monotonic() < deadline, f"{len(listed)} of {want} events after 15 s"
            time.sleep(0.05)
        out = []
        for item in listed:
            one = inbox.get(f"/inbox/{endpoint_id}/events/{item['id']}")
            assert one.status_code == 200, one.text
            out.append(one.json())
    return out


def body_of(event: dict[str, Any]) -> bytes:
    return base64.b64decode(event["body"]) if event["body_encoding"] == "base64" else event["body"].encode()


async def test_a_hostile_request_through_the_edge_copies_as_curl_that_sends_it_again(
    stack: Stack, database_url: str, copy: Copier
) -> None:
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush")
    account = await make_account(database_url)
    created = httpx.post(
        f"{stack.control_url}/v1/endpoints", json={"name": "audit"}, headers=account.headers, timeout=10
    )
    assert created.status_code == 201, created.text
    ep = created.json()["id"]
    page = httpx.get(f"{stack.control_url}/inbox/{ep}", headers=account.headers, timeout=10)
    assert page.status_code == 200, page.text
    ingest = html.unescape(re.search(r'data-ingest="([^"]*)"', page.text)[1])  # what the page's script reads
    answer = send_raw(ingest, f"{urlsplit(ingest).path}/{PATH}?{QUERY}")
    assert answer.startswith(b"HTTP/1.1 200"), answer

    [stored] = events(stack, account.headers, ep, 1)
    assert (stored["method"], stored["path"], stored["query"]) == (METHOD, f"/{PATH}", QUERY)
    assert stored["headers"][HEADER[0]] == HEADER[1]
    assert body_of(stored) == BODY

    text = copy(ingest, stored)
    for shell in SHELLS:
        ran = run_copied(text, shell)
        ran.assert_clean()
        parts = ran.parts()
        assert parts == request_parts(ingest, stored)
        assert (parts.method, parts.url, parts.body) == (METHOD.encode(), f"{ingest}/{PATH}?{QUERY}".encode(), BODY)
        assert f"{HEADER[0]}: {HEADER[1]}".encode() in parts.headers
        assert f"content-type: {CONTENT_TYPE}".encode() in parts.headers

    # The real curl: the text sends the same request again, and still nothing else runs.
    with tempfile.TemporaryDirectory(prefix="hy-curl-") as cwd:
        env = {"PATH": f"{Path(require('curl')).parent}:{os.environ.get('PATH', '')}", "HOME": cwd}
        done = subprocess.run(
            ["bash", "-c", text], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=30
        )
        assert done.returncode == 0, done.stderr
        assert os.listdir(cwd) == []
    again, first = events(stack, account.headers, ep, 2)
    assert first["id"] == stored["id"]
    assert (again["method"], again["path"], again["query"]) == (METHOD, f"/{PATH}", QUERY)
    assert body_of(again) == BODY
    for name in (HEADER[0], "content-type"):
        assert again["headers"][name] == stored["headers"][name]
