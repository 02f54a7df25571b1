"""The inbox's re-sign box names the header the server re-signs in by default: ``resign.js`` (run under Node
with the table the page carries) and ``shared.signatures.provider_signature_header`` agree on every provider's
samples, with the real and the neutral names, on an attributed event that lost its signature header, and on
an event of no provider scheme."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from control.api.inbox.page import _SIGNATURE_HEADERS
from shared.samples import EVENT_TYPES, sample
from shared.signatures import provider_signature_header
from tests.node_packages import node_executable

RESIGN_JS = Path(__file__).resolve().parents[2] / "control" / "static" / "resign.js"
RUN = """
const events = JSON.parse(require("fs").readFileSync(0, "utf8"));
global.window = {};
global.document = { body: { dataset: { signatureHeaders: process.argv[2] } } };
require(process.argv[1]);
console.log(JSON.stringify(events.map((e) => window.hookyardResign.ownHeader(e))));
"""


def _events() -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for provider, names in EVENT_TYPES.items():
        for family in ("vendor", "neutral"):
            made = sample(provider, names[0], secret="whsec_" + "s" * 32, family=family)  # type: ignore[arg-type]
            events.append({"provider": provider, "headers": made.headers, "header_encodings": {}})
            events.append({"provider": None, "headers": made.headers, "header_encodings": {}})  # detected
        events.append({"provider": provider, "headers": {"content-type": "application/json"}, "header_encodings": {}})
    events.append({"provider": None, "headers": {"content-type": "application/json"}, "header_encodings": {}})
    events.append({"provider": None, "headers": {"webhook-signature": "  "}, "header_encodings": {}})  # blank
    return events


def test_the_re_sign_box_names_the_header_the_server_uses() -> None:
    node_executable()  # fails, naming it, without Node.js
    events = _events()
    done = subprocess.run(
        ["node", "-e", RUN, str(RESIGN_JS), _SIGNATURE_HEADERS],
        input=json.dumps(events),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    shown = json.loads(done.stdout)
    expected = [provider_signature_header(e["headers"], e["provider"]) or "x-signature" for e in events]  # type: ignore[arg-type]
    assert shown == expected
    assert "stripe-signature" in shown
    assert "pay-signature" in shown
    assert shown[-2:] == ["x-signature", "x-signature"]
