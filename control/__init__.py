"""The control plane: the /v1 API, /api/start, /mcp, the workers and the ``hookyard`` CLI."""
