"""The control plane: the /v1 API, /api/start, /mcp, the workers and the ``hookyard`` CLI."""

import sys
import types

from shared import redis_probe


def _without_httpx_cli() -> None:
    """The httpx package imports its own command line client (``httpx._main``: rich, click and pygments),
    which hookyard never runs, unless that import fails: a third of a client command's start-up, and about
    50 ms of CPU in every control plane worker's (issue 44). A stand-in module takes its place (its ``main``
    says what it is), here, so that every process of the control plane has it before anything imports httpx:
    the ``hookyard`` CLI and ``hookyard worker``, and the control plane's granian workers, which import
    ``control.app`` without the CLI."""
    if "httpx" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main", "hookyard's stand-in for httpx's command line client")

    def main() -> None:
        raise SystemExit("httpx's command line client is not loaded in the hookyard process")

    stand_in.main = main  # type: ignore[attr-defined]  # a module object made at run time
    sys.modules.setdefault("httpx._main", stand_in)


_without_httpx_cli()
redis_probe.install()  # as in edge/__init__.py: redis-py's OpenTelemetry probe is not paid for
