"""``python -m bench NAME [--seconds N]``: runs one bench; its figures are the last line, as key=value."""

from __future__ import annotations

import argparse
import importlib

BENCHES = (
    "edge",
    "instructions",
    "flush",
    "list",
    "stats",
    "types",
    "wait",
    "delivery",
    "pipeline",
    "load",
    "faults",
    "erasure",
    "all",
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("name", choices=BENCHES)
    parser.add_argument("--seconds", type=float, default=10.0, help="rough duration of the measured part")
    args = parser.parse_args()
    figures = importlib.import_module(f"bench.{args.name}").run(args.seconds)
    print(f"bench={args.name} " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
