"""The edge as shipped, for ``bench edge``'s side-by-side runs, compiled the way ``bench.untraced`` and
``bench.four_kinds`` compile their builds (``bench.strip.load``, here with nothing to take out), so the three
builds differ by the lines taken out and not by how their modules were loaded. One callgrind run counted each
stripped build about 2,000 instructions a request above the imported edge; the next counted the loading
itself at -591 (``loader_instr``), within callgrind's own run-to-run spread here: like for like costs nothing
and settles the question (docs/adr/0063-edge-ratios-side-by-side.md)."""

from __future__ import annotations

import sys

from bench.strip import LOADED, load

__all__ = ("create_app",)

NOTHING = "# shipped as it is"
"""A mark no line of ``LOADED`` carries: every line is kept."""

for _name in LOADED:
    if _name in sys.modules:
        raise RuntimeError(f"{_name} was imported before bench.shipped could load it")
    load(_name, NOTHING)

create_app = sys.modules["edge.app"].create_app
