"""Every signature test runs twice: through the compiled fast path and through the Python checks alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.signatures import mac as signature_mac


@pytest.fixture(scope="module", autouse=True, params=["compiled", "python"])
def implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs twice: through the compiled fast path in front of the Python checks (what the
    edge runs), and through the Python checks alone (what runs where shared._native is not built)."""
    if request.param == "compiled" and signature_mac.native is None:
        pytest.fail("shared._native is not built here (see test_mac.py::test_the_compiled_parts_are_built_here)")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "python":
            patch.setattr(signature_mac, "native", None)
        yield request.param
