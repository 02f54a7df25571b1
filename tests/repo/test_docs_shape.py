"""The front door and the records stay readable: README.md at most 250 lines, every decision record at most
200 and listed in the index (docs/DECISIONS.md, under 150 lines), and the benchmark results in one table
(bench/RESULTS.md, written by ``python -m bench all``), not copied into other documents. The configuration
page, which says it lists every setting, names every ``Settings`` field's variable (a trial found two missing)."""

from __future__ import annotations

import re
from pathlib import Path

from shared.settings import Settings, env_name

ROOT = Path(__file__).resolve().parents[2]
ADRS = sorted(p for p in (ROOT / "docs" / "adr").glob("[0-9][0-9][0-9][0-9]-*.md") if not p.name.startswith("0000"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_readme_is_a_front_door_not_a_manual() -> None:
    assert _lines(ROOT / "README.md") <= 250


def test_every_decision_record_holds_its_decision_in_at_most_200_lines() -> None:
    assert ADRS
    long = {p.name: _lines(p) for p in ADRS if _lines(p) > 200}
    assert not long, f"rewrite to the decision, its reasons and consequences; summarise the figures: {long}"


def test_the_index_lists_every_record_and_stays_short() -> None:
    index = ROOT / "docs" / "DECISIONS.md"
    text = index.read_text(encoding="utf-8")
    missing = [p.name for p in ADRS if f"(adr/{p.name})" not in text]
    assert not missing, f"docs/DECISIONS.md has no line for {missing}"
    assert _lines(index) <= 150, "an index: a line or two per record, not its summary"


def test_bench_results_are_one_table_written_by_bench_all() -> None:
    """The table's head is the one ``bench.results`` writes; no other document carries a table of measured
    requests per second (a README or a page that copies figures drifts from the bench's)."""
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    assert "| figure | target | measured | date | commit | machine |" in results
    assert "Written by `python -m bench all`" in results
    copied = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("|") and re.search(r"\d[\d,.]*k? ?(req/s|events/s|deliveries/s|delivered/s)", line):
                copied.append(f"{path.relative_to(ROOT)}:{number}: {line[:100]}")
    assert not copied, "measured rates belong in bench/RESULTS.md:\n" + "\n".join(copied)


def test_the_configuration_page_names_every_setting() -> None:
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    missing = [env_name(f) for f in Settings.__struct_fields__ if f"`{env_name(f)}`" not in page]
    assert missing == [], f"docs/reference/configuration.md lacks {', '.join(missing)}"
