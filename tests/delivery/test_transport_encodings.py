"""The outbound transport's compressed responses: gzip, deflate and brotli bodies inflated only up to the
record cap, and encodings it does not inflate recorded as such."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import brotli
import pytest

from control.delivery import send as send_module
from control.delivery.send import MAX_RESPONSE_BYTES, Outcome
from control.delivery.transport import Transport
from tests.delivery.transport_support import answering, post, scripted, transport


def _encoded(encoding: bytes, body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-encoding: %b\r\ncontent-length: %d\r\n\r\n%b" % (encoding, len(body), body)


async def _post_measuring_peak(t: Transport, url: str) -> tuple[Outcome, int]:
    """One delivery, and the most memory Python had allocated at once while it ran."""
    tracemalloc.start()
    try:
        outcome = await post(t, url)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return outcome, peak


async def test_compressed_bodies_are_inflated_only_up_to_the_record_cap() -> None:
    text = b"accepted " * 20
    bomb = gzip.compress(b"0" * (64 << 20))  # 64 MiB of zeros in about 64 KB
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    deflated_raw = raw_deflate.compress(text) + raw_deflate.flush()

    replies = (
        _encoded(b"gzip", bomb),
        _encoded(b"gzip", gzip.compress(text)),
        _encoded(b"deflate", zlib.compress(text)),
        _encoded(b"deflate", deflated_raw),
        _encoded(b"gzip", b"not gzip at all"),
    )
    async with scripted(answering(*replies)) as p, transport() as t:
        first, peak = await _post_measuring_peak(t, p.url)
        outcomes = [first] + [await post(t, p.url) for _ in replies[1:]]
    assert peak < 8 << 20, f"inflating the bomb peaked at {peak >> 20} MiB"
    assert outcomes[0].status == 200
    assert outcomes[0].response_body == b"0" * MAX_RESPONSE_BYTES
    assert [o.response_body for o in outcomes[1:4]] == [text] * 3
    assert outcomes[4].status == 200
    assert outcomes[4].response_body.startswith(b"(response body not stored: gzip data is invalid")


async def test_brotli_bodies_are_inflated_only_up_to_the_record_cap() -> None:
    text = b"accepted " * 20
    bomb = brotli.compress(b"0" * (64 << 20), quality=5)  # 64 MiB of zeros in about 100 bytes
    replies = (_encoded(b"br", bomb), _encoded(b"br", brotli.compress(text)), _encoded(b"br", b"not brotli"))
    async with scripted(answering(*replies)) as p, transport() as t:
        first, peak = await _post_measuring_peak(t, p.url)
        outcomes = [first] + [await post(t, p.url) for _ in replies[1:]]
    assert peak < 8 << 20, f"inflating the bomb peaked at {peak >> 20} MiB"
    assert [o.status for o in outcomes] == [200, 200, 200]
    assert outcomes[0].response_body == b"0" * MAX_RESPONSE_BYTES
    assert outcomes[1].response_body == text
    assert outcomes[2].response_body.startswith(b"(response body not stored: br data is invalid")


async def test_encodings_not_inflated_are_recorded_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """No body reaches a decoder that could inflate it unbounded: compressions we do not inflate (and br
    without brotli installed) are noted instead; an unknown token is read as identity, as httpx does."""
    text = b"plain text after all"
    replies = (
        _encoded(b"zstd", b"\x28\xb5\x2f\xfd" + b"x" * 20),
        _encoded(b"gzip, br", brotli.compress(gzip.compress(text))),
        _encoded(b"utf-8", text),
        _encoded(b"identity", text),
        _encoded(b"br", brotli.compress(text)),
    )
    async with scripted(answering(*replies)) as p, transport() as t:
        outcomes = [await post(t, p.url) for _ in replies[:-1]]
        monkeypatch.setattr(send_module, "brotli", None)
        outcomes.append(await post(t, p.url))
    assert [o.status for o in outcomes] == [200] * 5
    assert [o.response_body for o in outcomes] == [
        b"(response body not stored: content-encoding zstd is not inflated)",
        b"(response body not stored: content-encoding gzip, br is not inflated)",
        text,
        text,
        b"(response body not stored: br needs brotli 1.2 or later)",
    ]
