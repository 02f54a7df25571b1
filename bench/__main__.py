"""``python -m bench NAME [--seconds N]``: runs one bench; its figures are the last line, as key=value."""

from __future__ import annotations

import argparse
import importlib

from bench.all import ORDER

BENCHES = (*(name for name in ORDER if name != "baseline"), "all")
"""Each bench by its module's name, in ``bench all``'s order (its own list: one list to keep)."""


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("name", choices=BENCHES)
    parser.add_argument("--seconds", type=float, default=10.0, help="rough duration of the measured part")
    args = parser.parse_args()
    figures = importlib.import_module(f"bench.{args.name}").run(args.seconds)
    print(f"bench={args.name} " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
