"""Instructions per request (callgrind) of the edge's hot path and of its floor: the edge's cost, repeatable.

Requests per second on a 2-core machine that also runs the load generator and Redis move by ±15% from run to
run; instruction counts do not. This bench drives the real ``EdgeApp`` (the edge bench's endpoint, signature
and body, real Redis) and ``bench.floor`` in one process acting as their ASGI server, 64 requests at a time,
under ``valgrind --tool=callgrind``. Each app runs twice, with ``SMALL`` and ``LARGE`` requests; the
difference divided by ``LARGE - SMALL`` is the count per request, free of start-up. Each part runs
``PART_CALLS`` times in a child that makes the same imports as an empty loop's child, which is subtracted.

``extra_instr`` (edge minus floor) is the edge's own per-request work: endpoint lookup, checks, header map,
attribution, signature, id, record and response. The parts are counted the same way on their own, so the
figures say where it goes: ``decide_instr`` (header map, attribution and signature), ``hmac_instr`` (the
HMAC-SHA256 alone, keyed states precomputed as the verifier keeps them; under valgrind OpenSSL cannot use
the CPU's SHA instructions, so this count overstates its share of real time), ``probe_instr`` (one msgspec
decode of ``type``/``id`` from the body) and ``ulid_instr``. ``untraced_instr`` is the edge compiled without its
tracing instrumentation (``bench.untraced``), so ``tracing_off_instr_ratio`` (untraced over edge) is what the
instrumentation costs with tracing off, in instructions (docs/adr/0061-one-trace-per-webhook.md);
``four_kinds_instr`` is the edge without the provider catalog's step (``bench.four_kinds``). Both builds are
compiled by ``bench.strip`` rather than imported, so the two ratios divide by ``shipped_instr``, the edge's
source compiled the same way with nothing taken out (``bench.shipped``): ``tracing_off_instr_ratio``
(untraced over shipped) and ``catalog_instr_ratio`` (four kinds over shipped) cross-check ``bench edge``'s two
CPU ratios, and ``loader_instr`` (shipped minus edge) is what the way of loading costs. These counts of the
edge's path move by about 1% from run to run (a ULID, the clock, Redis's answers): near-1 ratios read to
±0.02, not exactly (docs/adr/0063-edge-ratios-side-by-side.md).
``bench all`` turns ``extra_instr`` into the budget the 0.85x target leaves, with the edge bench's live figures
of the same run.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
from typing import Any

from bench.request import SECRET, payload
from bench.results import Target

__all__ = ("run",)

TARGETS = (
    Target(
        figure="instructions of the edge's own work per request, over its floor (callgrind)",
        key="extra_instr",
        beside=("decide_instr", "hmac_instr", "ulid_instr", "floor_instr"),
    ),
    Target(
        figure="instructions per request, edge with tracing off over the same code uninstrumented (compiled alike)",
        key="tracing_off_instr_ratio",
        bound=0.98,
        unit="×",
        beside=("untraced_instr", "shipped_instr"),
    ),
    Target(
        figure="instructions per request, edge with the full catalog over the four kinds alone (compiled alike)",
        key="catalog_instr_ratio",
        bound=0.97,
        unit="×",
        beside=("four_kinds_instr", "shipped_instr", "loader_instr"),
    ),
)


WAVE = 64
SMALL, LARGE = 640, 3840
PART_CALLS = 5_000
PARTS = ("decide", "header_map", "verify", "attribute", "hmac", "probe", "ulid")


class _Driver:
    """Just enough of an ASGI server to call an app in this process: one body message, statuses counted."""

    def __init__(self, app: Any, path: str, body: bytes, headers: dict[str, str]) -> None:
        self.app = app
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]
        self.scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "raw_path": path.encode(),  # what granian passes, and what the edge routes on
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"content-length", str(len(body)).encode()), *raw],
            "client": ("127.0.0.1", 40000),
        }
        self.message = {"type": "http.request", "body": body, "more_body": False}
        self.statuses: dict[int, int] = {}

    async def receive(self) -> dict[str, Any]:
        return self.message

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.statuses[message["status"]] = self.statuses.get(message["status"], 0) + 1

    async def serve(self, requests: int) -> None:
        async def one() -> None:
            await self.app(dict(self.scope), self.receive, self.send)

        for _ in range(requests // WAVE):
            await asyncio.gather(*(one() for _ in range(WAVE)))
        if set(self.statuses) != {200}:
            raise RuntimeError(f"in-process requests were not all 200: {self.statuses}")


async def _serve_floor(requests: int) -> None:
    import bench.floor

    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    await inbox.put({"type": "lifespan.startup"})
    lifespan = asyncio.create_task(bench.floor.app({"type": "lifespan"}, inbox.get, send))
    await asyncio.wait_for(started.wait(), 10)
    body, headers = payload()
    await _Driver(bench.floor.app, "/", body, headers).serve(requests)
    await inbox.put({"type": "lifespan.shutdown"})
    await lifespan


async def _serve_edge(token: str, requests: int) -> None:
    import gc

    from edge.app import EDGE_GC_THRESHOLD, EdgeApp
    from shared.settings import load_settings

    edge = EdgeApp(load_settings())
    await edge.startup()
    # As the edge's lifespan does once started (docs/adr/0010-freeze-the-startup-heap.md): without it, every
    # collection scans the start-up heap, and an edge that imported one module more counted 2,600 instructions
    # a request more for it (measured with collection off: 192).
    gc.freeze()
    gc.set_threshold(EDGE_GC_THRESHOLD, *gc.get_threshold()[1:])
    try:
        body, headers = payload()
        await _Driver(edge, f"/h/{token}", body, headers).serve(requests)
    finally:
        await edge.shutdown()


def _part(name: str, times: int) -> None:
    import msgspec

    from shared.attribution import attribute
    from shared.ids import ulid
    from shared.signatures import verifier
    from shared.signatures.mac import plain_mac

    class Probe(msgspec.Struct):
        type: str | None = None
        id: str | None = None

    probe = msgspec.json.Decoder(Probe)

    body, headers = payload()
    raw = [(b"host", b"127.0.0.1"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    named = dict(raw)
    now = time.time()
    check = verifier(SECRET, tolerance_s=3600)  # the edge's: the compiled fast path where it is built
    mac, prefix = plain_mac(SECRET), b"%d." % int(now)

    def decide() -> None:  # what the edge does per request between reading the body and the record
        headers = dict(raw)
        attribute(headers, body)
        check(headers, body, now)

    call = {
        "decide": decide,
        "header_map": lambda: dict(raw),
        "verify": lambda: check(named, body, now),
        "attribute": lambda: attribute(named, body),
        "hmac": lambda: mac(prefix, body),
        "probe": lambda: probe.decode(body),
        "ulid": lambda: ulid(),
        "none": lambda: None,
    }[name]
    for _ in range(times):
        call()


def _child(argv: list[str]) -> None:
    what, count = argv[0], int(argv[1])
    if what == "floor":
        asyncio.run(_serve_floor(count))
    elif what == "edge":
        asyncio.run(_serve_edge(argv[2], count))
    elif what == "untraced":  # the edge's source less its tracing lines (bench.untraced), served the same way
        import bench.untraced  # replaces edge.app before _serve_edge imports it

        asyncio.run(_serve_edge(argv[2], count))
    elif what == "shipped":  # the edge's source compiled as the two builds are (bench.shipped), nothing taken out
        import bench.shipped  # replaces edge.app before _serve_edge imports it

        asyncio.run(_serve_edge(argv[2], count))
    elif what == "four_kinds":  # the edge's source less the catalog's step (bench.four_kinds), served the same way
        import bench.four_kinds  # noqa: F401 - replaces edge.app before _serve_edge imports it

        asyncio.run(_serve_edge(argv[2], count))
    else:
        _part(what, count)


def _instructions(env: dict[str, str], *args: str) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", __name__, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise RuntimeError(f"callgrind printed no total:\n{out.stderr[-2000:]}")
    return int(match.group(1))


def _per_call(env: dict[str, str], what: str, small: int, large: int, *extra: str) -> float:
    return (_instructions(env, what, str(large), *extra) - _instructions(env, what, str(small), *extra)) / (
        large - small
    )


def run(seconds: float) -> dict[str, object]:
    from bench.infra import bench_env
    from bench.setup import create_endpoint

    if shutil.which("valgrind") is None:
        raise SystemExit("bench instructions needs valgrind: apt-get install valgrind")
    with bench_env(max_body_bytes=1_048_576) as bench:
        endpoint = asyncio.run(create_endpoint(bench.settings, secret=SECRET, tolerance_s=3600))
        env = {**bench.env, "PYTHONHASHSEED": "0"}
        floor = _per_call(env, "floor", SMALL, LARGE)
        edge = _per_call(env, "edge", SMALL, LARGE, endpoint.token)
        untraced = _per_call(env, "untraced", SMALL, LARGE, endpoint.token)
        four_kinds = _per_call(env, "four_kinds", SMALL, LARGE, endpoint.token)
        shipped = _per_call(env, "shipped", SMALL, LARGE, endpoint.token)
        # Every part's child makes the same imports and set-up, so one empty loop is the baseline of all.
        empty = _instructions(env, "none", str(PART_CALLS))
        parts = {name: (_instructions(env, name, str(PART_CALLS)) - empty) / PART_CALLS for name in PARTS}
    return {
        "floor_instr": round(floor),
        "edge_instr": round(edge),
        "extra_instr": round(edge - floor),
        "untraced_instr": round(untraced),
        # ADR 0061: the edge as shipped (tracing off) against the same code without its instrumentation
        "shipped_instr": round(shipped),
        "loader_instr": round(shipped - edge),
        "tracing_off_instr_ratio": round(untraced / shipped, 4),
        "four_kinds_instr": round(four_kinds),
        "catalog_instr_ratio": round(four_kinds / shipped, 4),
        **{f"{name}_instr": round(count) for name, count in parts.items()},
    }


if __name__ == "__main__":
    _child(sys.argv[1:])
