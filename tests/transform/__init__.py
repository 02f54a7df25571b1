"""Transformations: the JavaScript sandbox, deliveries and replays through it, its dry run, MCP and the inbox editor."""
