"""The benches' sink (``bench/sink.py``) as the benches run it, a process of its own: every request answered
200 and its ``x-hookyard-event-id`` written once, in order, whatever the framing (Content-Length, chunked,
pipelined, split anywhere); what it cannot parse answered 400, never counted. The pipeline and fault ledgers
count deliveries from its file, so a miscount here would be a false ledger there."""

from __future__ import annotations

import itertools
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import sink
from bench.ports import free_port


class Sink:
    def __init__(self, port: int, file: Path) -> None:
        self.port, self.file, self._seen = port, file, 0

    def new_lines(self) -> list[str]:
        """Lines written since the last call."""
        lines = self.file.read_text().splitlines() if self.file.exists() else []
        new, self._seen = lines[self._seen :], len(lines)
        return new

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)


@pytest.fixture(scope="module")
def sink_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sink]:
    port, file = free_port(), tmp_path_factory.mktemp("sink") / "sink.txt"
    proc = subprocess.Popen(sink.command(port, file), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "the sink did not listen within 15 s"
            time.sleep(0.05)
    try:
        yield Sink(port, file)
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture
def fresh(sink_process: Sink) -> Sink:
    sink_process.new_lines()
    return sink_process


def _request(event_id: str | None, body: bytes, *, chunked: bool = False, close: bool = False) -> bytes:
    head = [b"POST /hook HTTP/1.1", b"Host: 127.0.0.1", b"Content-Type: application/json"]
    if event_id is not None:
        head.append(b"X-Hookyard-Event-Id: " + event_id.encode())
    if close:
        head.append(b"Connection: close")
    if chunked:
        head.append(b"Transfer-Encoding: chunked")
        framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:3], body[3:]) if part) + b"0\r\n\r\n"
    else:
        head.append(b"Content-Length: %d" % len(body))
        framed = body
    return b"\r\n".join(head) + b"\r\n\r\n" + framed


def _responses(conn: socket.socket, count: int) -> list[bytes]:
    """Reads until ``count`` complete responses arrived (each ends with the 2-byte ``{}`` body or is a 400)."""
    data = b""
    while data.count(b"HTTP/1.1 ") < count or not data.endswith((b"{}", b"\r\n\r\n")):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return [b"HTTP/1.1 " + part for part in data.split(b"HTTP/1.1 ")[1:]]


def test_a_delivery_is_answered_200_and_its_event_id_written(fresh: Sink) -> None:
    reply = httpx.post(
        f"http://127.0.0.1:{fresh.port}/hook", content=b'{"a":1}', headers={"x-hookyard-event-id": "evt_1"}
    )
    assert (reply.status_code, reply.content) == (200, b"{}")
    assert fresh.new_lines() == ["evt_1"]


def test_chunked_pipelined_and_byte_by_byte_requests_each_count_once(fresh: Sink) -> None:
    stream = _request("evt_a", b'{"x":"1"}', chunked=True) + _request("evt_b", b"") + _request(None, b"{}")
    with fresh.connect() as conn:
        for byte in stream[:40]:  # the first request's head one byte at a time
            conn.sendall(bytes([byte]))
        conn.sendall(stream[40:])  # the rest pipelined in one write
        replies = _responses(conn, 3)
    assert [r.split(b"\r\n", 1)[0] for r in replies] == [b"HTTP/1.1 200 OK"] * 3
    assert fresh.new_lines() == ["evt_a", "evt_b", "-"]


def test_connection_close_is_honoured_after_the_answer(fresh: Sink) -> None:
    with fresh.connect() as conn:
        conn.sendall(_request("evt_c", b"{}", close=True))
        replies = _responses(conn, 1)
        assert conn.recv(1) == b""  # closed by the sink
    assert b"connection: close" in replies[0]
    assert fresh.new_lines() == ["evt_c"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"POST /hook HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"POST /hook HTTP/1.1\r\nX-Hookyard-Event-Id: evt_\x00nul\r\nContent-Length: 0\r\n\r\n",
        b"POST /hook HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_what_cannot_be_parsed_gets_a_400_and_is_not_counted(fresh: Sink, garbage: bytes) -> None:
    with fresh.connect() as conn:
        conn.sendall(garbage)
        reply = _responses(conn, 1)
        assert conn.recv(1) == b""
    assert reply[0].startswith(b"HTTP/1.1 400 ")
    assert fresh.new_lines() == []


_ids = st.one_of(st.none(), st.from_regex(r"evt_[0-9a-z]{1,20}", fullmatch=True))
_requests = st.lists(st.tuples(_ids, st.binary(max_size=300), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=_requests, cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=6))
def test_any_framing_and_any_split_counts_each_request_once_in_order(
    fresh: Sink, requests: list[tuple[str | None, bytes, bool]], cuts: list[int]
) -> None:
    stream = b"".join(_request(event_id, body, chunked=chunked) for event_id, body, chunked in requests)
    bounds = sorted({0, len(stream), *(c % len(stream) for c in cuts)})
    with fresh.connect() as conn:
        for start, end in itertools.pairwise(bounds):
            conn.sendall(stream[start:end])
        replies = _responses(conn, len(requests))
    assert len(replies) == len(requests)
    assert all(r.startswith(b"HTTP/1.1 200 OK") for r in replies)
    assert fresh.new_lines() == [event_id or "-" for event_id, _, _ in requests]
