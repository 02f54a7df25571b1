"""The repository itself: ruff, the import-linter layering, deploy/ and the Grafana dashboard in step with the
code, ``python -m bench`` without pytest. Checks of the files, not of a running service."""
