"""What both the edge and the control plane need: settings, Redis key names, ids, wire records, errors.

Imports neither ``edge`` nor ``control`` (checked by the import-linter contract in pyproject.toml).
"""
