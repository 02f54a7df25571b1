"""docs/reference/agents.md's Python MCP example, run as a user copies it, against real processes (the rig of
test_mcp.py: a stack of its own for this module). The MCP SDK's 2.x client differs from the 1.x one most
examples on the web show, so the documented block is run, not only read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from control.mcp.registry import TOOLS
from tests.e2e import mcp_rig
from tests.e2e.mcp_support import temporary
from tests.stack import Stack

pytestmark = pytest.mark.slow

database_url = mcp_rig.database_url
module_settings = mcp_rig.module_settings
running = mcp_rig.running
sink = mcp_rig.sink


def _documented_block() -> str:
    doc = (Path(__file__).parents[2] / "docs" / "reference" / "agents.md").read_text()
    section = doc.split("## From Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_python_example_runs(running: Stack) -> None:
    token, endpoint_id = temporary(running)
    env = {**os.environ, "HOOKYARD_MCP_URL": f"{running.control_url}/mcp", "HOOKYARD_TOKEN": token}
    env["HOOKYARD_ENDPOINT"] = endpoint_id
    code = _documented_block()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    tools, event = done.stdout.splitlines()
    assert tools == f"{len(TOOLS)} tools"
    assert re.fullmatch(r"evt_\w+ payments invoice\.paid signature_valid: True", event), event
