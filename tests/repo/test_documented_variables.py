"""Every ``HOOKYARD_*`` name the documents and the product's own text give a user is one ``hookyard`` accepts: a
setting, or a variable of the client commands. The settings refuse any other ``HOOKYARD_*`` name (a typo must
stop the process), so a name a page told users to export stopped every command in their shell: a trial
exported the agents page's ``HOOKYARD_TOKEN``/``HOOKYARD_ENDPOINT``/``HOOKYARD_MCP_URL`` and ``hookyard
trigger`` exited 2 with "HOOKYARD_ENDPOINT: unknown setting; did you mean HOOKYARD_ENDPOINT_QUOTA?"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.errors import ConfigError
from shared.settings import known_variables, load_settings

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"HOOKYARD_[A-Z0-9_]+(\*?)")
_TEXT = {".md", ".py", ".js", ".html", ".txt", ".yml", ".yaml", ".json", ".example", ""}
NOT_EXPORTED = {
    "HOOKYARD_EGDE_PORT": "docs/reference/configuration.md: the example of a typo the settings refuse",
    "HOOKYARD_ROUTING_CACHE_TTL_S": "docs/adr/0020-read-your-writes-through-config-versions.md: a removed setting",
}
"""Names written to say they are not accepted, each where it is written and why."""


def _documents() -> list[Path]:
    """README, docs/, and what the product shows or ships (its source, whose strings become help, messages and
    /llms.txt, and deploy/, whose files users copy)."""
    found = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for top in ("control", "edge", "shared", "deploy"):
        found += [
            p for p in (ROOT / top).rglob("*") if p.is_file() and p.suffix in _TEXT and "__pycache__" not in p.parts
        ]
    return sorted(found)


def _accepted(name: str) -> bool:
    try:
        load_settings({name: "1"})
    except ConfigError as exc:
        return "unknown setting" not in str(exc)
    return True


def test_every_hookyard_name_a_document_gives_is_accepted() -> None:
    known = known_variables()
    wrong: dict[str, list[str]] = {}
    for path in _documents():
        where = str(path.relative_to(ROOT))
        for match in _NAME.finditer(path.read_text(encoding="utf-8")):
            name, pattern = match[0].rstrip("*"), match[1]
            if pattern:  # HOOKYARD_PUBLIC_*_URL: a family, which must have members
                ok = any(k.startswith(name) for k in known)
            else:
                ok = _accepted(name) or (name in NOT_EXPORTED and NOT_EXPORTED[name].startswith(where + ":"))
            if not ok:
                wrong.setdefault(name, []).append(where)
    assert not wrong, (
        f"not a setting nor a CLI variable (rename them, outside HOOKYARD_ if hookyard reads none): {wrong}"
    )


@pytest.mark.parametrize("name", sorted(NOT_EXPORTED))
def test_the_names_written_as_not_accepted_are_still_there_and_still_refused(name: str) -> None:
    where = NOT_EXPORTED[name].split(":", 1)[0]
    assert name in (ROOT / where).read_text(encoding="utf-8")
    assert not _accepted(name)
