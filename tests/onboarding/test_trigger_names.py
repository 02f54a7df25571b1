"""``hookyard trigger`` takes the real providers' names (``stripe``, ``shopify``, ``github``, ``clerk``,
``svix``) beside the spec's, and when it refuses a name it lists the valid ones. (That the aliased samples
arrive and verify: ``test_samples_e2e``.)"""

from __future__ import annotations

import os

import pytest

from shared.samples import ALIASES, PROVIDERS, provider_name
from tests.onboarding.clirun import cli


@pytest.mark.parametrize(
    ("name", "provider"),
    [
        ("stripe", "payments"),
        ("Stripe", "payments"),
        ("shopify", "commerce"),
        ("github", "code_host"),
        ("clerk", "identity"),
        ("svix", "identity"),
        ("payments", "payments"),
        (" code_host ", "code_host"),
    ],
)
def test_a_providers_name_means_its_provider(name: str, provider: str) -> None:
    assert provider_name(name) == provider


@pytest.mark.parametrize("name", ["strpe", "paddel", "", "PAYMENTS.", "vendor"])
def test_anything_else_is_no_provider(name: str) -> None:
    assert provider_name(name) is None


def test_trigger_refuses_an_unknown_provider_listing_the_valid_ones() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
    done = cli(env, "trigger", "strpe", "invoice.paid", "--endpoint", "ep_x")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("hookyard: PROVIDER: 'strpe' is not a provider; one of ")
    for name in (*PROVIDERS, *ALIASES):
        assert name in done.stderr
    assert "stripe (payments)" in done.stderr
    assert "Traceback" not in done.stderr
    helped = cli(env, "trigger", "--help")
    assert "stripe (payments)" in " ".join(helped.stdout.split())
    assert "--headers {provider,neutral}" in helped.stdout


def test_the_cli_names_the_providers_the_samples_have() -> None:
    """The CLI reads the catalog's names without importing the samples at start-up: they must stay the same."""
    from control.cli.commands.webhooks import PROVIDER_NAMES
    from shared.providers import NAMES

    assert {**{p: p for p in PROVIDERS}, **ALIASES}.items() <= PROVIDER_NAMES.items()
    assert PROVIDER_NAMES == NAMES
