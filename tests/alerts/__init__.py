"""Operational alerts: conditions, exactly-once firing, signed sends, the /v1 and MCP surfaces."""
