"""control.records.storable, the one module for text Postgres can store, against the real server: its rule says
exactly what Postgres refuses (NUL, lone surrogates), caller text is refused by it, descriptive text is repaired
by it into text Postgres stores, and a captured request (any bytes: NUL, invalid UTF-8, huge) is kept whole.

Hypothesis draws the text; a real Postgres decides what is storable, through the jsonb codec the pools use."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.db import init_connection
from control.db.flush import COLUMNS
from control.records.storable import (
    NUL_PROBLEM,
    REPLACEMENT,
    captured_headers,
    check_text,
    event_row,
    headers_object,
    storable,
    text_problem,
)
from control.records.text import NO_NUL, PATTERN_RULES
from shared.errors import ValidationError
from shared.wire import IngestRecord
from tests.conftest import Servers

ANY_TEXT = st.text(st.characters(codec=None, categories=["L", "M", "N", "P", "S", "Z", "C"]), max_size=40)
"""Every code point, NUL and lone surrogates included (hypothesis leaves surrogates out unless told)."""
UNSTORABLE = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"])
TEXT = st.one_of(ANY_TEXT, st.builds(lambda a, bad, b: a + bad + b, ANY_TEXT, UNSTORABLE, ANY_TEXT))
"""Any text, often with something Postgres refuses in it."""
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Postgres:
    """One connection, set up as the pools set theirs up (``init_connection``: jsonb through msgspec), on an
    event loop in a thread of its own, so synchronous hypothesis tests can ask the real server what it stores."""

    def __init__(self, dsn: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._conn: asyncpg.Connection = self._run(asyncpg.connect(dsn))
        self._run(init_connection(self._conn))
        self._run(self._conn.execute("CREATE TEMP TABLE probe (t text, j jsonb, a text[])"))

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    def stores(self, text: str | None = None, json: object = None, array: list[str] | None = None) -> bool:
        """Whether an INSERT of these values into a text, a jsonb and a text[] column succeeds."""

        async def insert() -> bool:
            try:
                async with self._conn.transaction():
                    await self._conn.execute("INSERT INTO probe VALUES ($1, $2, $3)", text, json, array)
            except asyncpg.PostgresError:
                return False
            return True

        return self._run(insert())

    def close(self) -> None:
        self._run(self._conn.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


@pytest.fixture(scope="module")
def pg(servers: Servers) -> Iterator[Postgres]:
    postgres = Postgres(servers.database_url)
    try:
        yield postgres
    finally:
        postgres.close()


def _unstorable(c: str) -> bool:
    return c == "\x00" or "\ud800" <= c <= "\udfff"


# -- the rule, and caller text refused by it --------------------------------------------------------------


@EXAMPLES
@given(text=TEXT)
def test_the_rule_is_exactly_what_postgres_refuses(pg: Postgres, text: str) -> None:
    problem = text_problem(text)
    assert (problem is None) == pg.stores(text=text)
    assert (problem is None) == pg.stores(json={text: [text]})  # jsonb keys and values alike
    if "\x00" in text:
        assert problem == NUL_PROBLEM == PATTERN_RULES[NO_NUL]  # the same words msgspec's refusal uses
    elif problem is not None:
        assert problem.startswith("must not contain lone UTF-16 surrogates")


@given(text=TEXT)
def test_caller_text_is_refused_naming_the_field(text: str) -> None:
    problem = text_problem(text)
    if problem is None:
        assert check_text(text, "name") is text
        return
    with pytest.raises(ValidationError) as caught:
        check_text(text, "rules[0].name")
    assert caught.value.message == f"rules[0].name: {problem}"


@pytest.mark.parametrize("value", [None, 7, 1.5, True, b"\x00", ["\x00"], {"k": "\x00"}])
def test_check_text_passes_what_is_not_a_string_unchanged(value: object) -> None:
    assert check_text(value, "field") is value


# -- descriptive text repaired ------------------------------------------------------------------------------


@EXAMPLES
@given(text=TEXT)
def test_repaired_text_is_stored_and_differs_only_where_postgres_refused(pg: Postgres, text: str) -> None:
    repaired = storable(text)
    assert pg.stores(text=repaired, json={repaired: repaired}, array=[repaired])
    assert text_problem(repaired) is None
    assert len(repaired) == len(text)
    assert all(r == (REPLACEMENT if _unstorable(c) else c) for c, r in zip(text, repaired, strict=True))
    if text_problem(text) is None:
        assert repaired == text


JSON_LIKE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), TEXT),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TEXT, children, max_size=4)),
    max_leaves=12,
)


def _texts(value: object) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


@EXAMPLES
@given(value=JSON_LIKE)
def test_repaired_structures_are_stored_keys_and_values(pg: Postgres, value: object) -> None:
    repaired = storable(value)
    assert pg.stores(json={"v": repaired})
    assert all(text_problem(text) is None for text in _texts(repaired))
    if all(text_problem(text) is None for text in _texts(value)):
        assert repaired == value


def test_bodies_and_other_values_are_not_text() -> None:
    assert storable(b"\x00\xff") == b"\x00\xff"
    assert storable(None) is None
    assert storable(3) == 3


# -- a captured request kept whole ---------------------------------------------------------------------------

TOKEN_NAMES = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=8)
ANY_BYTES = st.one_of(
    st.binary(max_size=30),
    st.builds(lambda t: t.encode(), st.text(max_size=20)),
    st.sampled_from([b"a\x00b", b"caf\xe9", b"\xff\xfe", b"\xed\xa0\x80", b"ok"]),  # NUL, Latin-1, not UTF-8
)


@EXAMPLES
@given(headers=st.lists(st.tuples(TOKEN_NAMES, ANY_BYTES), max_size=6))
def test_captured_header_values_are_stored_and_come_back_exactly(
    pg: Postgres, headers: list[tuple[str, bytes]]
) -> None:
    raw = [(name.encode(), value) for name, value in headers]
    stored, encoded = headers_object(raw)
    assert pg.stores(json=stored, array=encoded)
    joined: dict[str, bytes] = {}
    for name, value in headers:
        joined[name] = value if name not in joined else joined[name] + b", " + value
    back = captured_headers(stored, encoded)
    assert {name: value.encode("utf-8", "surrogateescape") for name, value in back.items()} == joined
    for name, value in joined.items():  # text where the bytes are text Postgres can store, else base64
        is_text = _is_utf8(value) and text_problem(value.decode()) is None
        assert (name not in (encoded or ())) == is_text
        if is_text:
            assert stored[name] == value.decode()


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


@EXAMPLES
@given(headers=st.lists(st.tuples(st.binary(min_size=1, max_size=8), ANY_BYTES), max_size=5))
def test_any_header_name_is_stored(pg: Postgres, headers: list[tuple[bytes, bytes]]) -> None:
    stored, encoded = headers_object(headers)
    assert pg.stores(json=stored, array=encoded)
    for raw_name, _ in headers:
        name = raw_name.decode("latin-1")
        if name.isascii() and name.isprintable():
            assert name in stored  # an HTTP token, as every real server sends, is kept as it is


def _record(**fields: Any) -> IngestRecord:
    base: dict[str, Any] = {
        "id": "evt_1",
        "endpoint_id": "ep_1",
        "received_at_us": 1_700_000_000_000_000,
        "method": "POST",
        "path": "",
        "query": "",
        "headers": [(b"content-type", b"application/json")],
        "body": b"{}",
        "source_ip": "203.0.113.7",
    }
    return IngestRecord(**{**base, **fields})


_SCALARS = st.text(st.characters(codec="utf-8"), max_size=20)
NO_SURROGATES = st.one_of(_SCALARS, st.builds(lambda a, b: a + "\x00" + b, _SCALARS, _SCALARS))
"""What a msgpack string can hold (the ingest stream's encoding): any Unicode scalar value, often NUL."""


@EXAMPLES
@given(
    path=NO_SURROGATES,
    query=NO_SURROGATES,
    event_type=st.none() | NO_SURROGATES,
    key=st.none() | NO_SURROGATES,
    headers=st.lists(st.tuples(st.binary(min_size=1, max_size=8), ANY_BYTES), max_size=4),
    body=ANY_BYTES,
)
def test_every_text_of_an_event_row_is_stored(
    pg: Postgres,
    path: str,
    query: str,
    event_type: str | None,
    key: str | None,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    record = _record(path=path, query=query, event_type=event_type, idempotency_key=key, headers=headers, body=body)
    row = dict(zip(COLUMNS, event_row(record, [{"key": "k", "value": "v", "color": "red"}]), strict=True))
    texts = [value for value in row.values() if isinstance(value, str)]
    assert all(pg.stores(text=text) for text in texts)
    assert pg.stores(json=row["headers"], array=row["headers_base64"])
    assert row["body"] is body  # bytea, exactly as it came
    assert row["body_is_utf8"] == _is_utf8(body)
    for name, value in (("event_type", event_type), ("idempotency_key", key)):  # a reading, null if not text
        assert row[name] == (None if value is None or text_problem(value) else value)


# -- huge input ----------------------------------------------------------------------------------------------


def test_huge_text_is_judged_and_repaired_whole(pg: Postgres) -> None:
    """Megabytes, with the bad characters far in (no cap, no sampling): found, repaired one for one, stored."""
    size = 4 * 1024 * 1024
    text = "é" * size + "\ud800" + "a" * size + "\x00"
    started = time.monotonic()
    assert text_problem(text) == NUL_PROBLEM
    assert text_problem(text[:-1]).startswith("must not contain lone UTF-16 surrogates")
    repaired = storable(text)
    elapsed = time.monotonic() - started
    assert repaired == "é" * size + REPLACEMENT + "a" * size + REPLACEMENT
    assert pg.stores(text=repaired)
    assert elapsed < 10, f"{elapsed:.1f}s for 8 MiB of text"  # linear: a fraction of a second here


def test_huge_header_values_come_back_exactly(pg: Postgres) -> None:
    value = bytes(range(256)) * 4096  # 1 MiB, NUL and invalid UTF-8 throughout
    stored, encoded = headers_object([(b"x-big", value), (b"x-text", b"t" * 1_000_000)])
    assert encoded == ["x-big"]
    assert stored["x-text"] == "t" * 1_000_000
    assert pg.stores(json=stored, array=encoded)
    assert captured_headers(stored, encoded)["x-big"].encode("utf-8", "surrogateescape") == value
