"""docs/reference/providers.md is the catalog's own rendering (``shared.providers.reference``), so the page a
user reads names every provider the edge knows, with its scheme, handshake and the library its test used;
the README's first lines and /llms.txt name the same count."""

from __future__ import annotations

from pathlib import Path

from shared.providers import CATALOG
from shared.providers.reference import render, summary

ROOT = Path(__file__).resolve().parents[2]


def test_the_providers_page_is_generated_from_the_catalog() -> None:
    page = (ROOT / "docs/reference/providers.md").read_text()
    assert page == render(), "run: python -m shared.providers.reference > docs/reference/providers.md"
    for provider in CATALOG.values():
        assert f"| `{provider.name}` (" in page


def test_the_readme_names_the_count_in_its_first_lines() -> None:
    head = "\n".join((ROOT / "README.md").read_text().splitlines()[:10])
    assert f"{len(CATALOG)} providers" in head
    assert "docs/reference/providers.md" in head


def test_every_library_proof_names_a_test_that_uses_it() -> None:
    tests = "".join(p.read_text() for p in (ROOT / "tests/edge").glob("test_provider_libraries*.py"))
    tests += (ROOT / "tests/node/provider_proofs.mjs").read_text()
    for provider in CATALOG.values():
        if provider.kind is None and provider.proof.startswith(("library:", "community:")):
            for library in provider.proof.partition(":")[2].split(","):
                module = {
                    "slack-sdk": "slack_sdk",
                    "paddle-python-sdk": "paddle_billing",
                    "squareup": "square",
                    "hubspot-api-client": "hubspot",
                    "boxsdk": "box_sdk_gen",
                    "coinbase-commerce": "coinbase_commerce",
                }.get(library.strip(), library.strip())
                assert module in tests, (provider.name, library)
    assert "`slack`" in summary()


def test_every_proof_is_one_the_page_counts() -> None:
    """The page's count of proofs covers every provider: a proof of another kind would be left out of it
    (and shown as documented rule only)."""
    for provider in CATALOG.values():
        kind = provider.proof.partition(":")[0]
        assert kind in ("library", "community", "example", "documented"), (provider.name, provider.proof)
        assert (kind == "example") <= bool(provider.example), provider.name
