"""The operations: every one written once, called by the /v1 handlers and the MCP tools alike (and by the
inbox page). Nothing else lives here: a job a worker runs sits beside its loop in ``control.workers``, and
what operations, jobs and adapters share is in ``control.support`` (docs/adr/0066-operations-jobs-and-support.md).
A resource with several modules has a package (``destinations``, ``events``).

Functions take a ``Context`` (the process's pool, Redis client and settings) and, for account-scoped
operations, the caller's ``Principal``, both from ``control.db.context`` (their one import path); they
return public records and raise ``shared.errors`` types.
"""
