"""docs/reference/agents.md's Python MCP example, run as a user copies it, against real processes (the rig of
test_mcp.py: a stack of its own for this module). The MCP SDK's 2.x client differs from the 1.x one most
examples on the web show, so the documented block is run, not only read: through ``replay_event`` to a local
app that verifies with Stripe's own library (``tests/onboarding/verifying_app``), with nothing said about the
signature header (issue 45: the example stopped at ``wait_for_event``, and a replay re-signed in
``x-signature``, where the library never looks)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import stripe

from control.mcp.registry import TOOLS
from tests.e2e import mcp_rig
from tests.e2e.mcp_support import temporary
from tests.onboarding.verifying_app import verifying_app
from tests.stack import Stack

pytestmark = pytest.mark.slow

database_url = mcp_rig.database_url
module_settings = mcp_rig.module_settings
mcp_stack = mcp_rig.mcp_stack
sink = mcp_rig.sink

SECRET = "whsec_the_apps_own_secret_0123456789"


def _documented_block() -> str:
    doc = (Path(__file__).parents[2] / "docs" / "reference" / "agents.md").read_text()
    section = doc.split("## From Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_python_example_runs(mcp_stack: Stack) -> None:
    token, endpoint_id = temporary(mcp_stack)
    env = {**os.environ, "HOOKYARD_CONTROL_URL": mcp_stack.control_url, "HOOKYARD_API_KEY": token}
    env["ENDPOINT_ID"] = endpoint_id
    code = _documented_block()
    with verifying_app(SECRET) as app:
        env |= {"APP_URL": app.url, "WEBHOOK_SECRET": SECRET}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        tools, event, replayed = done.stdout.splitlines()
        assert tools == f"{len(TOOLS)} tools"
        found = re.fullmatch(r"(evt_\w+) payments invoice\.paid signature_valid: True", event)
        assert found, event
        assert replayed == f"replayed to {app.url} 200"
        (checked,) = app.snapshot()
    assert (checked.libraries, checked.error) == (["stripe"], None)
    assert stripe.Webhook.construct_event(checked.body, checked.headers["stripe-signature"], SECRET)["type"] == (
        "invoice.paid"
    )
