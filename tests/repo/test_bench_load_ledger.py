"""``bench.load_ledger``, the load bench's verdict: the answers the locust users wrote down against events rows
stored in a real database, compared by identity. Counting instead (acked = stored = distinct = valid =
delivered) called a stored event whose answer was never read a mismatch (the false MISMATCH in
``bench/RESULTS.md``), and called a lost event hidden behind such an extra one fine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.load_ledger import Ack, AnswerLog, Answers, Ledger, judge, read_answers, stored_rows
from control.db import connect
from tests.destination import add_endpoint
from tests.events_support import Ev, store, store_delivery


async def _stored(database_url: str, *events: tuple[Ev, bool]) -> str:
    """Stores the events (each with a successful rule delivery when its flag says so) on the endpoint they
    name; returns that endpoint."""
    conn = await connect(database_url)
    try:
        await store(conn, None, None, [e for e, _ in events])
        for event, delivered in events:
            if delivered:
                await store_delivery(conn, event.endpoint_id, event.id, created_at=datetime.now(UTC))
    finally:
        await conn.close()
    return events[0][0].endpoint_id


async def _endpoint(database_url: str) -> str:
    conn = await connect(database_url)
    try:
        return await add_endpoint(conn)
    finally:
        await conn.close()


def _event(endpoint_id: str, key: str, *, valid: bool = True) -> Ev:
    event = Ev(endpoint_id=endpoint_id, provider="payments", idempotency_key=key, signature_valid=valid)
    event.row()  # gives it its id
    return event


def _ack(event: Ev) -> Ack:
    return Ack(endpoint_id=event.endpoint_id, event_id=event.id, key=event.idempotency_key or "")


async def _ledger(database_url: str, endpoint_id: str, *acked: Ack, refused: int = 0) -> Ledger:
    return judge(Answers(acked=acked, refused=refused), await stored_rows(database_url, [endpoint_id]))


async def test_a_stored_event_whose_answer_nobody_read_is_counted_apart_and_allowed(database_url: str) -> None:
    endpoint_id = await _endpoint(database_url)
    seen, unread = _event(endpoint_id, "evt_a"), _event(endpoint_id, "evt_d")
    await _stored(database_url, (seen, True), (unread, True))
    ledger = await _ledger(database_url, endpoint_id, _ack(seen), refused=1)
    assert (ledger.acked, ledger.stored, ledger.unacked_stored, ledger.sent) == (1, 2, 1, 2)
    assert (ledger.lost, ledger.duplicated, ledger.invalid, ledger.undelivered) == (0, 0, 0, 0)
    assert ledger.ok


async def test_a_lost_event_behind_an_unacknowledged_one_is_caught_though_the_counts_agree(database_url: str) -> None:
    endpoint_id = await _endpoint(database_url)
    seen, unread, lost = _event(endpoint_id, "evt_a"), _event(endpoint_id, "evt_d"), _event(endpoint_id, "evt_c")
    await _stored(database_url, (seen, True), (unread, True))  # acked 2 = stored 2 = valid 2 = delivered 2
    ledger = await _ledger(database_url, endpoint_id, _ack(seen), _ack(lost))
    assert (ledger.acked, ledger.stored, ledger.lost, ledger.unacked_stored) == (2, 2, 1, 1)
    assert not ledger.ok


async def test_an_acknowledged_event_stored_twice_is_a_duplicate_by_its_id_or_its_key(database_url: str) -> None:
    endpoint_id = await _endpoint(database_url)
    once, twice, by_key = _event(endpoint_id, "evt_a"), _event(endpoint_id, "evt_b"), _event(endpoint_id, "evt_k")
    same_id = Ev(
        id=twice.id,
        endpoint_id=endpoint_id,
        received_at=twice.received_at + timedelta(milliseconds=1),  # the key is (id, received_at)
        provider="payments",
        idempotency_key="evt_b",
        signature_valid=True,
    )
    other_id = _event(endpoint_id, "evt_k")  # the same request stored again under a new id
    await _stored(database_url, (once, True), (twice, True), (same_id, True), (by_key, True), (other_id, False))
    ledger = await _ledger(database_url, endpoint_id, _ack(once), _ack(twice), _ack(by_key))
    assert (ledger.acked, ledger.stored, ledger.duplicated, ledger.unacked_stored) == (3, 5, 2, 0)
    assert (ledger.lost, ledger.invalid, ledger.undelivered) == (0, 0, 0)
    assert not ledger.ok


async def test_an_acknowledged_event_must_verify_and_be_delivered(database_url: str) -> None:
    endpoint_id = await _endpoint(database_url)
    forged, stuck = _event(endpoint_id, "evt_f", valid=False), _event(endpoint_id, "evt_u")
    await _stored(database_url, (forged, True), (stuck, False))
    ledger = await _ledger(database_url, endpoint_id, _ack(forged), _ack(stuck))
    assert (ledger.invalid, ledger.undelivered, ledger.lost, ledger.duplicated) == (1, 1, 0, 0)
    assert not ledger.ok
    assert not (await _ledger(database_url, endpoint_id)).ok  # nothing acknowledged proves nothing


def test_each_process_writes_its_own_answers_and_a_line_cut_short_is_no_acknowledgement(tmp_path: Path) -> None:
    log = AnswerLog(tmp_path)
    log.acked("ep_1", "evt_01", "key-1")
    log.refused("ep_1", "key-2", 503)
    log.close()
    (tmp_path / "1.answers").write_text("ack ep_2 evt_02 key-3\nack ep_2 ev")  # killed mid-line
    answers = read_answers(tmp_path)
    assert set(answers.acked) == {
        Ack(endpoint_id="ep_1", event_id="evt_01", key="key-1"),
        Ack(endpoint_id="ep_2", event_id="evt_02", key="key-3"),
    }
    assert answers.refused == 2
