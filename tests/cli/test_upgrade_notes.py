"""`hookyard up` says what an upgrade's migrations start in the background (ADR 0057: the finished days' `q`
indexes on a data directory made before them), and says nothing of it on a first run."""

from __future__ import annotations

from control.cli.up import before_notes, upgrade_notes
from control.db.migrate import available


def test_an_upgrade_past_0036_says_the_sweep_indexes_the_finished_days() -> None:
    notes = upgrade_notes(["0036_search_grams"])
    assert len(notes) == 1
    assert "trigram index" in notes[0]
    assert "docs/adr/0057-q-trigrams-without-an-extension.md" in notes[0]


def test_an_upgrade_past_0039_says_the_sweep_rebuilds_the_days_keyed_by_endpoint() -> None:
    notes = upgrade_notes(["0039_search_keys"])
    assert len(notes) == 1
    assert "keyed by endpoint" in notes[0]
    assert "same answers" in notes[0]
    assert len(upgrade_notes(["0036_search_grams", "0039_search_keys"])) == 2


def test_a_first_run_applies_everything_and_has_nothing_to_say() -> None:
    assert upgrade_notes([version for version, _ in available()]) == []
    assert upgrade_notes([]) == []


def test_an_upgrade_past_0040_says_beforehand_that_the_id_indexes_are_rebuilt() -> None:
    """Said before the migration runs (it holds the tables while the indexes are rebuilt), not after."""
    notes = before_notes(["0040_id_collation"])
    assert len(notes) == 1
    assert "rebuilt once, now" in notes[0]
    assert "minutes" in notes[0]
    assert "docs/adr/0072-ids-compare-as-bytes.md" in notes[0]
    assert before_notes([version for version, _ in available()]) == []  # a first run: nothing to rebuild
    assert before_notes([]) == []
