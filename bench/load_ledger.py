"""The load bench's ledger, by identity: each ingest answer the locust users saw against the rows stored.

The promise is per event: every request answered 200 (its event id given back) is stored exactly once, with
a valid signature, and delivered. Counting it (acknowledged = stored) was wrong twice over: locust's
aggregated CSV is no record of what its users saw (with ``--processes`` each worker reports every 3 s, and
at the end the master waits 0.5 s for the last reports and writes its CSV once a second, so the final
seconds of requests were missing from it: acked=728 beside stored=1115, errors=0); and equal counts can
hide a lost event behind an extra one. So each locust process writes every ingest answer to its own file
(``AnswerLog``), and ``judge`` compares sets:

- ``acked``: answered 200 with an event id; ``refused``: any other answer; the run's ``sent`` is both;
- ``lost``: acked, never stored; ``duplicated``: stored rows beyond one per acked request, by its event id
  or by its idempotency key on its endpoint (the same request stored twice under two ids);
- ``invalid``: acked and stored, signature not valid; ``undelivered``: acked and stored, no successful rule
  delivery;
- ``unacked_stored``: stored, no acknowledgement matches it (a request whose answer the sender never read,
  a timeout, a process stopped mid-request): not a promise broken, the sender would retry.

``ok`` only with something acknowledged and nothing lost, duplicated, invalid or undelivered.
"""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import msgspec

__all__ = ("Ack", "AnswerLog", "Answers", "Ledger", "Stored", "judge", "read_answers", "stored_rows")

_SUFFIX = ".answers"


class Ack(msgspec.Struct, kw_only=True, frozen=True):
    """One request answered 200: where it went, the event id the edge gave back, the idempotency key sent."""

    endpoint_id: str
    event_id: str
    key: str


class Answers(msgspec.Struct, kw_only=True, frozen=True):
    acked: tuple[Ack, ...]
    refused: int


class Stored(msgspec.Struct, kw_only=True, frozen=True):
    """One events row of the run's endpoints, with whether a rule delivery of it succeeded."""

    id: str
    endpoint_id: str
    idempotency_key: str | None
    signature_valid: bool | None
    delivered: bool


class Ledger(msgspec.Struct, kw_only=True, frozen=True):
    sent: int
    acked: int
    refused: int
    stored: int
    lost: int
    duplicated: int
    invalid: int
    undelivered: int
    unacked_stored: int

    @property
    def ok(self) -> bool:
        return self.acked > 0 and self.lost == self.duplicated == self.invalid == self.undelivered == 0


class AnswerLog:
    """This process's file of ingest answers in ``directory``, one line each, written as each answer is read:
    a locust process stopped mid-run keeps every line of the answers its users saw (line-buffered)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file = (directory / f"{os.getpid()}{_SUFFIX}").open("a", buffering=1)

    def acked(self, endpoint_id: str, event_id: str, key: str) -> None:
        self._file.write(f"ack {endpoint_id} {event_id} {key}\n")

    def refused(self, endpoint_id: str, key: str, status: int) -> None:
        self._file.write(f"no {endpoint_id} {status} {key}\n")

    def close(self) -> None:
        self._file.close()


def read_answers(directory: Path) -> Answers:
    """Every process's answers; a line cut short (a process killed mid-write) counts as refused: its sender
    cannot have read the id."""
    acked: list[Ack] = []
    refused = 0
    for path in sorted(directory.glob(f"*{_SUFFIX}")):
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if parts[0] == "ack" and len(parts) == 4 and parts[2].startswith("evt_"):
                acked.append(Ack(endpoint_id=parts[1], event_id=parts[2], key=parts[3]))
            else:
                refused += 1
    return Answers(acked=tuple(acked), refused=refused)


_STORED = """SELECT e.id, e.endpoint_id, e.idempotency_key, e.signature_valid,
                    EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.source = 'rule' AND d.success)
                      AS delivered
               FROM events e WHERE e.endpoint_id = any($1::text[])"""


async def stored_rows(database_url: str, endpoint_ids: list[str]) -> list[Stored]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(_STORED, endpoint_ids)
    finally:
        await conn.close()
    return [Stored(**dict(row.items())) for row in rows]


def judge(answers: Answers, rows: list[Stored]) -> Ledger:
    """The ledger of ``answers`` against ``rows`` (module docstring): sets, never counts compared."""
    by_id: dict[str, list[int]] = {}
    by_key: dict[tuple[str, str], list[int]] = {}
    for at, row in enumerate(rows):
        by_id.setdefault(row.id, []).append(at)
        if row.idempotency_key is not None:
            by_key.setdefault((row.endpoint_id, row.idempotency_key), []).append(at)
    matched: set[int] = set()  # the rows (by position) some acknowledgement accounts for
    lost = duplicated = invalid = undelivered = 0
    for ack in answers.acked:
        own = [rows[at] for at in by_id.get(ack.event_id, [])]
        same = {*by_id.get(ack.event_id, []), *by_key.get((ack.endpoint_id, ack.key), [])}
        matched |= same
        duplicated += max(0, len(same) - 1)
        if not own:
            lost += 1
        elif not all(r.signature_valid for r in own):
            invalid += 1
        elif not any(r.delivered for r in own):
            undelivered += 1
    return Ledger(
        sent=len(answers.acked) + answers.refused,
        acked=len(answers.acked),
        refused=answers.refused,
        stored=len(rows),
        lost=lost,
        duplicated=duplicated,
        invalid=invalid,
        undelivered=undelivered,
        unacked_stored=len(rows) - len(matched),
    )
