"""The service layer: every operation written once, called by the /v1 handlers and the MCP tools alike.

Functions take a ``Context`` (the process's pool, Redis client and settings) and, for account-scoped
operations, the caller's ``Principal``, both from ``control.db.context`` (their one import path); they
return public records and raise ``shared.errors`` types.
"""
