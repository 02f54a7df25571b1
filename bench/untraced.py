"""The edge with its tracing instrumentation taken out, for ``bench edge``: the same source, less every line
marked ``# traced`` (and the block such a line opens), so the bench can set the edge as it ships (tracing off)
beside the edge without the instrumentation, in the same run (docs/adr/0061-one-trace-per-webhook.md).

granian loads ``bench.untraced:create_app``; importing this module first replaces ``shared.wire`` and
``edge.app`` in ``sys.modules`` with their stripped compilations (in import order, before
anything imports the originals), and ``create_app`` is then the stripped ``edge.app``'s.
"""

from __future__ import annotations

import sys

from bench.strip import LOADED, load

__all__ = ("create_app",)

for _name in LOADED:  # STRIPPED, and edge.ingest compiled alike (bench.shipped)
    if _name in sys.modules:
        raise RuntimeError(f"{_name} was imported before bench.untraced could strip it")
    load(_name)

create_app = sys.modules["edge.app"].create_app
