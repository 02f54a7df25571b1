"""The edge with the provider catalog's step taken out, for ``bench edge``: the same source less every line
marked ``# catalog`` in ``edge.ingest`` (and the block such a line opens), so the bench sets the edge as it
ships (the full catalog: recognition by header name, the catalog's checks and handshakes) beside the four
kinds alone, in the same run (docs/adr/0054-provider-catalog.md).

granian loads ``bench.four_kinds:create_app``; importing this module first replaces ``edge.ingest`` and
``edge.app`` in ``sys.modules`` with their stripped compilations, before anything imports the originals.
"""

from __future__ import annotations

import sys

from bench.strip import LOADED, load

__all__ = ("create_app",)

CATALOG_MARK = "# catalog"
STRIPPED = ("edge.ingest", "edge.app")

for _name in LOADED:  # STRIPPED, and shared.wire compiled alike (bench.shipped)
    if _name in sys.modules:
        raise RuntimeError(f"{_name} was imported before bench.four_kinds could strip it")
    load(_name, CATALOG_MARK)

create_app = sys.modules["edge.app"].create_app
